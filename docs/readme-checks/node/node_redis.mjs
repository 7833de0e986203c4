// node-redis against LOCK.ACQUIRE ... BLOCK (README: client libraries).
// Usage: node node_redis.mjs PORT
import { createClient, createClientPool } from 'redis';
import { readFileSync } from 'node:fs';

const port = Number(process.argv[2]);
const version = JSON.parse(readFileSync(new URL('./node_modules/redis/package.json', import.meta.url))).version;
const admin = createClient({ socket: { port } }); await admin.connect();
const secs = t => ((Date.now() - t) / 1000).toFixed(1) + 's';
const blocked = async () => Number((await admin.sendCommand(['INFO', 'lock'])).match(/lock_blocked:(\d+)/)[1]);
async function hold(key) {
  await admin.sendCommand(['DEL', key]);
  await admin.sendCommand(['LOCK.ACQUIRE', key, 'holder', 'PX', '600000']);
}

// Defaults: no reply timeout (commandOptions.timeout only covers the wait before sending).
await hold('check:nr');
let c = createClient({ socket: { port } }); await c.connect();
let t = Date.now();
console.log(`node-redis ${version} defaults, BLOCK 8000 (held):`,
  await c.sendCommand(['LOCK.ACQUIRE', 'check:nr', 'w', 'PX', '30000', 'BLOCK', '8000']), 'after', secs(t));

// Five waiters on one client, on a pool, on duplicates.
async function five(label, clientFor) {
  const t = Date.now();
  const r = await Promise.all([1, 2, 3, 4, 5].map(async i => {
    const x = await (await clientFor()).sendCommand(['LOCK.ACQUIRE', 'check:nr', `w${i}`, 'PX', '30000', 'BLOCK', '2000']);
    return `${x}@${secs(t)}`;
  }));
  console.log(label, r.join(' '));
}
await five('5 x BLOCK 2000 on one client:', async () => c);
const pool = await createClientPool({ socket: { port } }).connect();
await five('5 x BLOCK 2000 through createClientPool():', async () => pool);
const dups = [];
await five('5 x BLOCK 2000 on client.duplicate() each:', async () => { const d = c.duplicate(); await d.connect(); dups.push(d); return d; });

// socket.socketTimeout shorter than BLOCK.
const b0 = await blocked();
const st = createClient({ socket: { port, socketTimeout: 1000 } }); st.on('error', () => {}); await st.connect();
t = Date.now();
try { await st.sendCommand(['LOCK.ACQUIRE', 'check:nr', 'st', 'PX', '30000', 'BLOCK', '5000']); }
catch (e) { console.log(`socketTimeout 1000, BLOCK 5000: ${e.name}: ${e.message} after ${secs(t)}`); }
await new Promise(r => setTimeout(r, 3000));
console.log('  queue entries made:', (await blocked()) - b0, '; 3 s later LOCK.INFO:', JSON.stringify(await admin.sendCommand(['LOCK.INFO', 'check:nr'])));

await admin.sendCommand(['DEL', 'check:nr']);
st.destroy(); c.destroy(); dups.forEach(d => d.destroy()); await pool.close(); admin.destroy();
