// ioredis against LOCK.ACQUIRE ... BLOCK (README: client libraries).
// Usage: node ioredis.mjs PORT
import Redis from 'ioredis';
import { readFileSync } from 'node:fs';

const port = Number(process.argv[2]);
const version = JSON.parse(readFileSync(new URL('./node_modules/ioredis/package.json', import.meta.url))).version;
const admin = new Redis({ port });
const sleep = ms => new Promise(r => setTimeout(r, ms));
const secs = t => ((Date.now() - t) / 1000).toFixed(1) + 's';
const blocked = async () => Number((await admin.info('lock')).match(/lock_blocked:(\d+)/)[1]);
const info = async () => JSON.stringify(await admin.call('LOCK.INFO', 'check:io'));
async function hold() { await admin.del('check:io'); await admin.call('LOCK.ACQUIRE', 'check:io', 'holder', 'PX', '600000'); }

await hold();
let c = new Redis({ port }); let t = Date.now();
console.log(`ioredis ${version} defaults, BLOCK 3000 (held):`, await c.call('LOCK.ACQUIRE', 'check:io', 'w', 'PX', '30000', 'BLOCK', '3000'), 'after', secs(t));
t = Date.now();
const three = await Promise.all([1, 2, 3].map(i => c.call('LOCK.ACQUIRE', 'check:io', `w${i}`, 'PX', '30000', 'BLOCK', '2000').then(x => `${x}@${secs(t)}`)));
console.log('3 x BLOCK 2000 on one connection:', three.join(' '));
c.disconnect();

// commandTimeout shorter than BLOCK, connection kept: still queued, granted later.
await hold();
c = new Redis({ port, commandTimeout: 1000 }); t = Date.now();
try { await c.call('LOCK.ACQUIRE', 'check:io', 'gave-up', 'PX', '30000', 'BLOCK', '5000'); }
catch (e) { console.log(`commandTimeout 1000, BLOCK 5000: "${e.message}" after ${secs(t)}`); }
console.log('  LOCK.INFO right after:', await info());
await sleep(1000);
await admin.call('LOCK.RELEASE', 'check:io', 'holder');
await sleep(100);
console.log('  the holder released; LOCK.INFO:', await info());
t = Date.now();
console.log('  next owner, BLOCK 3000:', await admin.call('LOCK.ACQUIRE', 'check:io', 'next', 'PX', '30000', 'BLOCK', '3000'), 'after', secs(t));
c.disconnect();

// The rule: close the connection after a client-side timeout.
await hold();
c = new Redis({ port, commandTimeout: 1000 });
try { await c.call('LOCK.ACQUIRE', 'check:io', 'gave-up', 'PX', '30000', 'BLOCK', '5000'); } catch { c.disconnect(); }
await sleep(100);
console.log('closed after the timeout; LOCK.INFO:', await info());
await admin.call('LOCK.RELEASE', 'check:io', 'holder');
console.log('  the holder released; LOCK.INFO:', await info());

// socketTimeout shorter than BLOCK: reconnects and re-sends; watched for 15 s.
await hold();
const b0 = await blocked();
c = new Redis({ port, socketTimeout: 1000 }); c.on('error', () => {}); t = Date.now();
const call = c.call('LOCK.ACQUIRE', 'check:io', 'st', 'PX', '30000', 'BLOCK', '5000').then(x => `returned ${x} after ${secs(t)}`, e => `failed "${e.message}" after ${secs(t)}`);
const outcome = await Promise.race([call, sleep(15000).then(() => 'no answer within 15 s')]);
console.log(`socketTimeout 1000, BLOCK 5000: ${outcome}; queue entries made: ${(await blocked()) - b0}`);
c.disconnect();
await admin.del('check:io');
admin.disconnect();
process.exit(0);
