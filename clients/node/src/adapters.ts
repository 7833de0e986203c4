/**
 * One interface over node-redis and ioredis: commands on the user's client,
 * and connections of the lock's own.
 *
 * Why a connection of its own for every wait: node-redis answers one
 * blocking command per connection at a time (everything else on it waits
 * behind the BLOCK), and ioredis's commandTimeout would give up on a waiter
 * that the server may still grant the lock to; its reconnect would re-send
 * the BLOCK at the queue's tail. The lock's connections never reconnect,
 * never retry, have no command timeout, and are closed at once when a wait
 * is abandoned, so the server drops the waiter.
 */

import type { Arg } from './protocol';

export interface Connection {
  call(args: Arg[]): Promise<unknown>;
  /** Closes the socket now (pending calls fail). */
  close(): void;
  /** Called once if the connection closes without close(). */
  onLost(cb: () => void): void;
}

export interface Adapter {
  /** A command on the user's client. */
  call(args: Arg[]): Promise<unknown>;
  /** A new connection of the lock's own, connected. */
  connect(): Promise<Connection>;
}

/** What Lock accepts: a node-redis client, an ioredis client, or an Adapter. */
export type Client = object;

// Integers as strings, so 64-bit fencing tokens stay exact (RESP type ':').
const EXACT_NUMBERS = { typeMapping: { 58: String } };

interface NodeRedisLike {
  sendCommand(args: Arg[], options?: object): Promise<unknown>;
  duplicate(overrides?: object): NodeRedisLike;
  connect(): Promise<unknown>;
  destroy?(): void;
  disconnect?(): Promise<void>;
  on(event: string, cb: (...a: unknown[]) => void): unknown;
  options?: { socket?: object };
}

interface IoredisLike {
  call(command: string, ...args: Arg[]): Promise<unknown>;
  duplicate(overrides?: object): IoredisLike;
  connect(): Promise<unknown>;
  disconnect(reconnect?: boolean): void;
  on(event: string, cb: (...a: unknown[]) => void): unknown;
  status: string;
}

function isAdapter(c: object): c is Adapter {
  return typeof (c as Adapter).connect === 'function' && typeof (c as Adapter).call === 'function' && !('status' in c) && !('sendCommand' in c);
}

function isIoredis(c: object): c is IoredisLike {
  return typeof (c as IoredisLike).call === 'function' && 'status' in c && typeof (c as IoredisLike).duplicate === 'function';
}

function isNodeRedis(c: object): c is NodeRedisLike {
  return typeof (c as NodeRedisLike).sendCommand === 'function' && typeof (c as NodeRedisLike).duplicate === 'function';
}

export function adapt(client: Client): Adapter {
  if (isAdapter(client)) return client;
  if (isIoredis(client)) return fromIoredis(client);
  if (isNodeRedis(client)) return fromNodeRedis(client);
  throw new TypeError('hashlock: expected a node-redis client, an ioredis client, or an Adapter');
}

function lostOnce(): { fire: () => void; on: (cb: () => void) => void; closing: () => void } {
  let cb: (() => void) | undefined;
  let done = false;
  return {
    fire: () => {
      if (!done) {
        done = true;
        cb?.();
      }
    },
    on: (f) => {
      cb = f;
    },
    closing: () => {
      done = true;
    },
  };
}

export function fromNodeRedis(client: NodeRedisLike): Adapter {
  return {
    call: (args) => client.sendCommand(args, EXACT_NUMBERS),
    async connect() {
      const conn = client.duplicate({
        socket: { ...(client.options?.socket ?? {}), reconnectStrategy: false, socketTimeout: undefined },
        commandOptions: undefined,
        pingInterval: undefined,
      });
      const lost = lostOnce();
      conn.on('error', () => {}); // reported through the failed call or onLost
      conn.on('end', lost.fire);
      await conn.connect();
      return {
        call: (args) => conn.sendCommand(args, EXACT_NUMBERS),
        close() {
          lost.closing();
          if (conn.destroy) conn.destroy();
          else void conn.disconnect?.().catch(() => {});
        },
        onLost: lost.on,
      };
    },
  };
}

export function fromIoredis(client: IoredisLike): Adapter {
  return {
    call: ([command, ...args]) => client.call(String(command), ...args),
    async connect() {
      const conn = client.duplicate({
        lazyConnect: true,
        commandTimeout: undefined,
        socketTimeout: undefined,
        blockingTimeout: undefined,
        retryStrategy: () => null,
        reconnectOnError: () => false,
        autoResendUnfulfilledCommands: false,
        maxRetriesPerRequest: 0,
        stringNumbers: true,
      });
      const lost = lostOnce();
      conn.on('error', () => {});
      conn.on('end', lost.fire);
      await conn.connect();
      return {
        call: ([command, ...args]) => conn.call(String(command), ...args),
        close() {
          lost.closing();
          conn.disconnect(false);
        },
        onLost: lost.on,
      };
    },
  };
}
