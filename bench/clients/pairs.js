// make bench B11, Node.js: one Lock (the default: KEEPALIVE, blocking
// acquire), acquire + release in a loop, for SECONDS after a warm-up.
// Prints one JSON line: pairs, seconds and the connections the server
// accepted meanwhile (INFO stats, read on the user's own client).
//
//   node pairs.js PORT SECONDS node-redis|ioredis [path to hashlock's dist/src]
'use strict';
const path = require('node:path');

const [port, seconds, flavour, lib] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4], process.argv[5]];
const nodeDir = path.join(__dirname, '..', '..', 'clients', 'node');
const fromClient = (m) => require(require.resolve(m, { paths: [nodeDir] }));
const { Lock } = require(lib ?? path.join(nodeDir, 'dist', 'src'));
const KEY = `bench:b11:${flavour}`;
const WARMUP = 50;

async function connect() {
  if (flavour === 'node-redis') {
    const c = fromClient('redis').createClient({ socket: { port, host: '127.0.0.1' } });
    c.on('error', () => {});
    await c.connect();
    return { client: c, info: () => c.sendCommand(['INFO', 'stats']), close: () => c.destroy() };
  }
  const IORedis = fromClient('ioredis');
  const c = new (IORedis.default ?? IORedis)({ port, host: '127.0.0.1', lazyConnect: true });
  c.on('error', () => {});
  await c.connect();
  return { client: c, info: () => c.call('INFO', 'stats'), close: () => c.disconnect() };
}

const received = (text) => Number(/total_connections_received:(\d+)/.exec(String(text))[1]);

async function main() {
  const { client, info, close } = await connect();
  const lock = new Lock(client, KEY);
  for (let i = 0; i < WARMUP; i++) {
    await lock.acquire();
    await lock.release();
  }
  const before = received(await info());
  let n = 0;
  const t0 = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - t0) / 1e9;
  for (;;) {
    await lock.acquire();
    await lock.release();
    n++;
    if (n % 64 === 0 && elapsed() >= seconds) break;
  }
  const took = elapsed();
  const conns = received(await info()) - before;
  close();
  process.stdout.write(`${JSON.stringify({ pairs: n, seconds: took, connections: conns })}\n`);
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
