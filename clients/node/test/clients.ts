import { createClient } from 'redis';
import IORedis from 'ioredis';

export type Flavour = 'node-redis' | 'ioredis';

/** The user's client of each library, connected; `close` ends it. */
export async function connectClient(flavour: Flavour, port: number, options: { resp?: 2 | 3 } = {}) {
  if (flavour === 'node-redis') {
    const client = createClient({ socket: { port, host: '127.0.0.1' }, RESP: options.resp ?? 2 });
    client.on('error', () => {});
    await client.connect();
    return { client, close: () => client.destroy() };
  }
  const client = new IORedis({ port, host: '127.0.0.1', lazyConnect: true, protocol: options.resp ?? 2 } as never);
  client.on('error', () => {});
  await client.connect();
  return { client, close: () => client.disconnect() };
}
