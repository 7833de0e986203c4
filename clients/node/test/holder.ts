/**
 * Child process for the KEEPALIVE test: takes the lock (keepalive, the
 * default), prints "held", and waits to be killed.
 *   node dist/test/holder.js <node-redis|ioredis> <port> <key>
 */
import { Lock } from '../src';
import { connectClient, type Flavour } from './clients';

async function main() {
  const [flavour, port, key] = process.argv.slice(2);
  const { client } = await connectClient(flavour as Flavour, Number(port));
  const lock = new Lock(client, key, { leaseMs: 30_000 });
  if (!(await lock.acquire({ blocking: false }))) throw new Error('busy');
  process.stdout.write('held\n');
  setInterval(() => {}, 60_000);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
