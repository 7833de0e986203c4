/**
 * One interface over node-redis and ioredis, standalone or cluster: commands
 * on the user's client, and connections of the library's own to a node.
 *
 * Why connections of its own: node-redis answers one blocking command per
 * connection at a time (everything else on it waits behind the BLOCK), and
 * ioredis's commandTimeout would give up on a waiter that the server may
 * still grant the lock to; its reconnect would re-send the BLOCK at the
 * queue's tail. A KEEPALIVE lock lives as long as the connection that took
 * it. The library's connections never reconnect, never retry, have no
 * command timeout, are unref'd (they never keep a process alive), and report
 * their end however it comes (closed by the server, reset, an error).
 */

import type { Arg } from './protocol';
import { keySlot } from './slot';

/** A node's address. */
export interface Address {
  host: string;
  port: number;
}

export interface Connection {
  call(args: Arg[]): Promise<unknown>;
  /** Closes the socket now (pending calls fail); no end is reported. */
  close(): void;
  /**
   * `cb` is called once if the connection ends other than by close(): the
   * server closed it (CLIENT KILL, timeout, shutdown), it was reset, or it
   * failed. A later call replaces an earlier `cb`.
   */
  onEnd(cb: ((why: Error) => void) | undefined): void;
  /** False once it ended or was closed. */
  readonly open: boolean;
}

/** A subscriber connection of the library's own (pub/sub). */
export interface Subscriber {
  /** Subscribes; resolves once the server confirmed it. `cb(message)` for every message on `channel`. */
  subscribe(channel: string, cb: (message: string) => void): Promise<void>;
  unsubscribe(channel: string): Promise<void>;
  close(): void;
  /** `cb` is called once if the connection ends other than by close(). */
  onEnd(cb: ((why: Error) => void) | undefined): void;
}

export interface Adapter {
  /** A command on the user's client (in a cluster: routed by its key, args[1]). */
  call(args: Arg[]): Promise<unknown>;
  /** A new connection of the library's own, connected: to `address`, or (none given) to the node serving `key`. */
  connect(address?: Address, key?: string): Promise<Connection>;
  /** The node serving `key` (undefined: the client's own server). */
  nodeFor?(key: string): Address | undefined;
  /** A subscriber connection to the node serving `key` (lifecycle events). */
  subscriber?(key: string): Promise<Subscriber>;
  /** The database the client uses (keyspace channels name it). */
  database?(): number;
}

/** What Lock accepts: a node-redis client or cluster, an ioredis client or cluster, or an Adapter. */
export type Client = object;

// Integers as strings, so 64-bit fencing tokens stay exact (RESP type ':').
const EXACT_NUMBERS = { typeMapping: { 58: String } };

interface NodeRedisLike {
  sendCommand(args: Arg[], options?: object): Promise<unknown>;
  duplicate(overrides?: object): NodeRedisLike;
  connect(): Promise<unknown>;
  destroy?(): void;
  disconnect?(): Promise<void>;
  unref?(): void;
  on(event: string, cb: (...a: unknown[]) => void): unknown;
  options?: { socket?: { host?: string; port?: number } & object; url?: string };
}

interface NodeRedisClusterLike {
  sendCommand(firstKey: Arg | undefined, isReadonly: boolean | undefined, args: Arg[], options?: object): Promise<unknown>;
  getNodeClientForKey(key: Arg): Promise<NodeRedisLike>;
  nodeClient(node: object): Promise<NodeRedisLike>;
  readonly masters: object[];
  readonly nodeByAddress: Map<string, object>;
  readonly slots: { master: { host: string; port: number } }[];
}

interface IoredisLike {
  call(command: string, ...args: Arg[]): Promise<unknown>;
  duplicate(overrides?: object): IoredisLike;
  connect(): Promise<unknown>;
  disconnect(reconnect?: boolean): void;
  on(event: string, cb: (...a: unknown[]) => void): unknown;
  status: string;
  stream?: { unref?(): void };
  options?: { host?: string; port?: number };
}

interface IoredisClusterLike {
  isCluster: true;
  call(command: string, ...args: Arg[]): Promise<unknown>;
  nodes(role?: string): IoredisLike[];
  slots: string[][];
}

function isAdapter(c: object): c is Adapter {
  return typeof (c as Adapter).connect === 'function' && typeof (c as Adapter).call === 'function' && !('status' in c) && !('sendCommand' in c);
}

function isIoredisCluster(c: object): c is IoredisClusterLike {
  return (c as IoredisClusterLike).isCluster === true && typeof (c as IoredisClusterLike).nodes === 'function';
}

function isIoredis(c: object): c is IoredisLike {
  return typeof (c as IoredisLike).call === 'function' && 'status' in c && typeof (c as IoredisLike).duplicate === 'function';
}

function isNodeRedisCluster(c: object): c is NodeRedisClusterLike {
  return typeof (c as NodeRedisClusterLike).getNodeClientForKey === 'function' && typeof (c as NodeRedisClusterLike).nodeClient === 'function';
}

function isNodeRedis(c: object): c is NodeRedisLike {
  return typeof (c as NodeRedisLike).sendCommand === 'function' && typeof (c as NodeRedisLike).duplicate === 'function';
}

export function adapt(client: Client): Adapter {
  if (isAdapter(client)) return client;
  if (isIoredisCluster(client)) return fromIoredisCluster(client);
  if (isIoredis(client)) return fromIoredis(client);
  if (isNodeRedisCluster(client)) return fromNodeRedisCluster(client);
  if (isNodeRedis(client)) return fromNodeRedis(client);
  throw new TypeError('hashlock: expected a node-redis or ioredis client or cluster, or an Adapter');
}

/** The end of a connection, reported once unless it was closed on purpose. */
class Ending {
  private cb?: (why: Error) => void;
  ended = false;
  fire = (why?: unknown) => {
    if (this.ended) return;
    this.ended = true;
    this.cb?.(why instanceof Error ? why : new Error(`connection ${String(why ?? 'closed')}`));
  };
  on(cb: ((why: Error) => void) | undefined) {
    this.cb = cb;
  }
  closing() {
    this.ended = true;
  }
}

function parseAddress(a: string): Address {
  const i = a.lastIndexOf(':');
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
}

/** A node-redis client of the library's own, duplicated from `template`. */
async function nodeRedisConnection(template: NodeRedisLike, address?: Address): Promise<Connection> {
  const socket = { ...(template.options?.socket ?? {}), reconnectStrategy: false, socketTimeout: undefined };
  const overrides: Record<string, unknown> = { socket, commandOptions: undefined, pingInterval: undefined };
  if (address) {
    Object.assign(socket, { host: address.host, port: address.port });
    overrides.url = undefined; // the template's URL would win over host/port (its other parts are already parsed)
  }
  const conn = template.duplicate(overrides);
  const ending = new Ending();
  conn.on('error', ending.fire); // node-redis reports a server-side close as an error, not always `end`
  conn.on('end', () => ending.fire(new Error('connection closed')));
  await conn.connect();
  conn.unref?.();
  return {
    call: (args) => conn.sendCommand(args, EXACT_NUMBERS),
    close() {
      ending.closing();
      if (conn.destroy) conn.destroy();
      else void conn.disconnect?.().catch(() => {});
    },
    onEnd: (cb) => ending.on(cb),
    get open() {
      return !ending.ended;
    },
  };
}

/** A node-redis subscriber of the library's own, duplicated from `template`. */
async function nodeRedisSubscriber(template: NodeRedisLike, address?: Address): Promise<Subscriber> {
  const socket = { ...(template.options?.socket ?? {}), reconnectStrategy: false, socketTimeout: undefined };
  const overrides: Record<string, unknown> = { socket, commandOptions: undefined, pingInterval: undefined };
  if (address) {
    Object.assign(socket, { host: address.host, port: address.port });
    overrides.url = undefined;
  }
  const conn = template.duplicate(overrides) as NodeRedisLike & {
    subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<void>;
    unsubscribe(channel: string): Promise<void>;
  };
  const ending = new Ending();
  conn.on('error', ending.fire);
  conn.on('end', () => ending.fire(new Error('connection closed')));
  await conn.connect();
  conn.unref?.();
  return {
    subscribe: (channel, cb) => conn.subscribe(channel, (message) => cb(String(message))),
    unsubscribe: (channel) => conn.unsubscribe(channel),
    close() {
      ending.closing();
      if (conn.destroy) conn.destroy();
      else void conn.disconnect?.().catch(() => {});
    },
    onEnd: (cb) => ending.on(cb),
  };
}

/** An ioredis subscriber of the library's own, duplicated from `template`. */
async function ioredisSubscriber(template: IoredisLike, address?: Address): Promise<Subscriber> {
  const conn = template.duplicate({
    ...(address ? { host: address.host, port: address.port } : {}),
    lazyConnect: true,
    commandTimeout: undefined,
    socketTimeout: undefined,
    retryStrategy: () => null,
    reconnectOnError: () => false,
    autoResendUnfulfilledCommands: false,
    autoResubscribe: false,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    protocol: 2,
  } as object) as IoredisLike & { subscribe(c: string): Promise<unknown>; unsubscribe(c: string): Promise<unknown> };
  const ending = new Ending();
  const listeners = new Map<string, (m: string) => void>();
  conn.on('message', (channel: unknown, message: unknown) => listeners.get(String(channel))?.(String(message)));
  conn.on('error', ending.fire);
  conn.on('close', () => ending.fire(new Error('connection closed')));
  conn.on('end', () => ending.fire(new Error('connection closed')));
  await conn.connect();
  conn.stream?.unref?.();
  return {
    async subscribe(channel, cb) {
      listeners.set(channel, cb);
      await conn.subscribe(channel);
    },
    async unsubscribe(channel) {
      listeners.delete(channel);
      await conn.unsubscribe(channel);
    },
    close() {
      ending.closing();
      conn.disconnect(false);
    },
    onEnd: (cb) => ending.on(cb),
  };
}

function nodeRedisDatabase(c: NodeRedisLike): number {
  const o = c.options as { database?: number; url?: string } | undefined;
  if (o?.database !== undefined) return Number(o.database);
  const m = o?.url ? /^rediss?:\/\/[^/]*\/(\d+)/.exec(o.url) : null;
  return m ? Number(m[1]) : 0;
}

export function fromNodeRedis(client: NodeRedisLike): Adapter {
  return {
    call: (args) => client.sendCommand(args, EXACT_NUMBERS),
    connect: (address) => nodeRedisConnection(client, address),
    subscriber: () => nodeRedisSubscriber(client),
    database: () => nodeRedisDatabase(client),
  };
}

export function fromNodeRedisCluster(cluster: NodeRedisClusterLike): Adapter {
  const template = async (address?: Address, key?: string) => {
    if (address) {
      const node = cluster.nodeByAddress.get(`${address.host}:${address.port}`) ?? cluster.masters[0];
      return cluster.nodeClient(node);
    }
    return key === undefined ? cluster.nodeClient(cluster.masters[0]) : cluster.getNodeClientForKey(key);
  };
  return {
    call: (args) => cluster.sendCommand(args[1], false, args, EXACT_NUMBERS),
    async connect(address, key) {
      const t = await template(address, key);
      return nodeRedisConnection(t, address ?? nodeRedisAddress(t));
    },
    nodeFor(key) {
      const master = cluster.slots[keySlot(key)]?.master;
      return master ? { host: master.host, port: master.port } : undefined;
    },
    async subscriber(key) {
      const t = await template(undefined, key);
      return nodeRedisSubscriber(t, nodeRedisAddress(t));
    },
    database: () => 0,
  };
}

function nodeRedisAddress(c: NodeRedisLike): Address | undefined {
  const s = c.options?.socket;
  return s?.host !== undefined && s?.port !== undefined ? { host: s.host, port: s.port } : undefined;
}

/** An ioredis client of the library's own, duplicated from `template`. */
async function ioredisConnection(template: IoredisLike, address?: Address): Promise<Connection> {
  const conn = template.duplicate({
    ...(address ? { host: address.host, port: address.port } : {}),
    lazyConnect: true,
    commandTimeout: undefined,
    socketTimeout: undefined,
    blockingTimeout: undefined,
    retryStrategy: () => null,
    reconnectOnError: () => false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    stringNumbers: true,
  });
  const ending = new Ending();
  conn.on('error', ending.fire);
  conn.on('close', () => ending.fire(new Error('connection closed')));
  conn.on('end', () => ending.fire(new Error('connection closed')));
  await conn.connect();
  conn.stream?.unref?.();
  return {
    call: ([command, ...args]) => conn.call(String(command), ...args),
    close() {
      ending.closing();
      conn.disconnect(false);
    },
    onEnd: (cb) => ending.on(cb),
    get open() {
      return !ending.ended;
    },
  };
}

export function fromIoredis(client: IoredisLike): Adapter {
  return {
    call: ([command, ...args]) => client.call(String(command), ...args),
    connect: (address) => ioredisConnection(client, address),
    subscriber: () => ioredisSubscriber(client),
    database: () => Number((client.options as { db?: number } | undefined)?.db ?? 0),
  };
}

export function fromIoredisCluster(cluster: IoredisClusterLike): Adapter {
  const nodeFor = (key: string): Address | undefined => {
    const node = cluster.slots[keySlot(key)]?.[0];
    return node ? parseAddress(node) : undefined;
  };
  return {
    call: ([command, ...args]) => cluster.call(String(command), ...args),
    async connect(address, key) {
      const template = cluster.nodes('master')[0];
      if (!template) throw new Error('hashlock: the ioredis cluster has no master node yet (is it connected?)');
      return ioredisConnection(template, address ?? (key === undefined ? undefined : nodeFor(key)));
    },
    nodeFor,
    async subscriber(key) {
      const template = cluster.nodes('master')[0];
      if (!template) throw new Error('hashlock: the ioredis cluster has no master node yet (is it connected?)');
      return ioredisSubscriber(template, nodeFor(key));
    },
    database: () => 0,
  };
}
