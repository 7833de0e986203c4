// Runs the README's node-redis snippet verbatim against make run's server
// (port 6380): five copies at once while another owner holds the lock 1 s.
import { createClient, createClientPool } from 'redis';
import { readFileSync } from 'node:fs';

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
const snippet = readme.match(/\*\*Node\.js \(node-redis\)\*\*\n\n```js\n([\s\S]*?)```/)[1];
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
const run = new AsyncFunction('createClientPool', 'me', 'doWork', snippet + '\nawait pool.close();\nreturn held;');
const admin = createClient({ socket: { port: 6380 } }); await admin.connect();
await admin.sendCommand(['DEL', 'orders:42']);
await admin.sendCommand(['LOCK.ACQUIRE', 'orders:42', 'other', 'PX', '60000']);
setTimeout(() => admin.sendCommand(['LOCK.RELEASE', 'orders:42', 'other']), 1000);
const t = Date.now(); const order = [];
const held = await Promise.all([1, 2, 3, 4, 5].map(i => run(createClientPool, `me-${i}`, async () => {
  order.push(`me-${i}@${((Date.now() - t) / 1000).toFixed(2)}s`);
  await new Promise(r => setTimeout(r, 100));
})));
console.log('replies:', held.join(','), '; work done in turn:', order.join(' '));
console.log('afterwards LOCK.INFO orders:42 ->', JSON.stringify(await admin.sendCommand(['LOCK.INFO', 'orders:42'])));
await admin.close();
