/**
 * The library's own connections: a pool of them per user client, and
 * `Dedicated`, a call site that takes one from the pool for the node serving
 * its key and follows MOVED/ASK.
 *
 * Why a pool: opening a TCP connection per acquisition caps a process at a
 * thousand or so acquisitions a second and leaves a socket in TIME_WAIT for
 * each. A connection whose lock was released cleanly holds nothing on the
 * server (no lock, no queue entry) and serves the next acquisition. Only a
 * wait abandoned on the client side (an aborted signal) or a connection that
 * failed is closed: closing is what takes its queue entry, and any grant
 * tied to it, off the server.
 *
 * Nothing here knows about locks: the same pieces serve every primitive.
 */

import type { Adapter, Address, Client, Connection } from './adapters';
import type { Arg } from './protocol';

/** MOVED/ASK redirections followed for one call. */
export const MAX_REDIRECTS = 5;
/** Idle connections a pool keeps per node; more are closed when given back. */
export const MAX_IDLE = 64;

const addressKey = (a?: Address) => (a ? `${a.host}:${a.port}` : '');

export class ConnectionPool {
  private readonly idle = new Map<string, Connection[]>();
  /** Connections this pool opened (the benchmark's "new connections per 1000 acquisitions"). */
  opened = 0;
  /** Run by closeIdleConnections (the event subscribers close). */
  readonly onClose: (() => void)[] = [];

  constructor(
    readonly adapter: Adapter,
    readonly maxIdle = MAX_IDLE,
  ) {}

  /** An open connection to `address` (or to the node serving `key`): an idle one, or a new one. */
  async take(address?: Address, key?: string): Promise<Connection> {
    const list = this.idle.get(addressKey(address));
    while (list?.length) {
      const conn = list.pop()!;
      if (conn.open) return conn;
    }
    const conn = await this.adapter.connect(address, key);
    this.opened++;
    return conn;
  }

  /** A connection that holds nothing on the server: kept for the next take(). */
  giveBack(conn: Connection, address?: Address): void {
    const k = addressKey(address);
    let list = this.idle.get(k);
    if (!list) this.idle.set(k, (list = []));
    if (!conn.open || list.length >= this.maxIdle) {
      conn.close();
      return;
    }
    list.push(conn);
    // An idle connection that ends leaves the pool.
    conn.onEnd(() => {
      const i = list!.indexOf(conn);
      if (i >= 0) list!.splice(i, 1);
    });
  }

  /** Closes every idle connection. */
  close(): void {
    for (const list of this.idle.values()) for (const conn of list.splice(0)) conn.close();
  }
}

const POOLS = new WeakMap<object, ConnectionPool>();
const CLIENT_IDS = new WeakMap<Connection, number>();

/** The library's pool for `client` (one per user client, made on first use). */
export function poolFor(client: Client, adapter: Adapter): ConnectionPool {
  let pool = POOLS.get(client);
  if (!pool) POOLS.set(client, (pool = new ConnectionPool(adapter)));
  return pool;
}

/** Closes the idle connections the library keeps for `client` (held locks keep theirs), and its event subscribers. */
export function closeIdleConnections(client: Client): void {
  const pool = POOLS.get(client);
  if (!pool) return;
  pool.close();
  for (const cb of pool.onClose) cb();
}

function redirection(e: unknown): { ask: boolean; address: Address } | undefined {
  const m = /^(MOVED|ASK) \d+ (.+):(\d+)$/.exec(String((e as Error | undefined)?.message ?? ''));
  return m ? { ask: m[1] === 'ASK', address: { host: m[2], port: Number(m[3]) } } : undefined;
}

/**
 * One connection of the caller's own for one key: taken from the pool for
 * the node that serves the key, following MOVED/ASK (a re-issued BLOCK joins
 * the new node's queue at the tail). giveBack() returns it to the pool (only
 * when it holds nothing on the server); close() closes it.
 */
export class Dedicated {
  private conn?: Connection;
  address?: Address;
  private ending?: (why: Error) => void;

  constructor(
    readonly pool: ConnectionPool,
    readonly key: string,
  ) {
    this.address = pool.adapter.nodeFor?.(key);
  }

  get open(): boolean {
    return this.conn?.open ?? false;
  }

  async call(args: Arg[], onSent?: (conn: Connection) => void): Promise<unknown> {
    let asking = false;
    for (let redirects = 0; ; redirects++) {
      const conn = (this.conn ??= await this.pool.take(this.address, this.key));
      conn.onEnd(this.ending);
      try {
        if (asking) await conn.call(['ASKING']);
        const reply = conn.call(args);
        onSent?.(conn);
        return await reply;
      } catch (e) {
        const to = redirection(e);
        if (!to || redirects >= MAX_REDIRECTS) throw e;
        // The redirected command did nothing on the old node: its connection is clean.
        this.giveBack();
        this.address = to.address;
        asking = to.ask;
      }
    }
  }

  /** The server's CLIENT ID of the current connection (asked once per connection). */
  async clientId(): Promise<number> {
    const conn = (this.conn ??= await this.pool.take(this.address, this.key));
    let id = CLIENT_IDS.get(conn);
    if (id === undefined) {
      id = Number(String(await conn.call(['CLIENT', 'ID'])));
      CLIENT_IDS.set(conn, id);
    }
    return id;
  }

  /** A new call site on the same node (another connection of the pool). */
  sibling(): Dedicated {
    const d = new Dedicated(this.pool, this.key);
    d.address = this.address;
    return d;
  }

  /** `cb` is called once if the connection ends while this holds it. */
  onEnd(cb: ((why: Error) => void) | undefined): void {
    this.ending = cb;
    this.conn?.onEnd(cb);
  }

  giveBack(): void {
    const conn = this.conn;
    this.conn = undefined;
    if (conn) {
      conn.onEnd(undefined);
      this.pool.giveBack(conn, this.address);
    }
  }

  close(): void {
    const conn = this.conn;
    this.conn = undefined;
    conn?.close();
  }
}
