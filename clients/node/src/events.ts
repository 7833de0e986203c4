/**
 * Lifecycle keyspace events: one subscriber connection per node and user
 * client, shared by every watcher of a key there.
 *
 * The module fires a keyspace event of class `d` on every change of holder
 * (`lock.acquired|released|expired|forced|closed`, the `rwlock.*` and
 * `semaphore.*` families, `latch.opened`) on `__keyspace@<db>__:<key>`, in
 * the order things happened. A holder's loss watch hears of a forced
 * release, an expiry or an eviction as it happens; an Election observer
 * hears of every change of leader. No polling.
 *
 * Whether the server sends them at all is `notify-keyspace-events` (needs K
 * and d): `flags()` reads it once per node, so the library can say so at
 * once instead of waiting for events that never come.
 *
 * Nothing here knows about locks.
 */

import type { Subscriber } from './adapters';
import { Dedicated, type ConnectionPool } from './pool';

/** The event a Follower reports once it is subscribed (a watch checks then). */
export const SUBSCRIBED = '(subscribed)';

/** Events that say nothing about a hold's loss (a grant; a holder's own release): the others make a watch check at once. */
export const QUIET = new Set(['lock.acquired', 'rwlock.acquired', 'semaphore.acquired', 'lock.released', 'rwlock.released', 'semaphore.released', 'latch.opened']);

/** `notify-keyspace-events` delivers module events on keyspace channels: K, and d (or A). */
export function hearsLifecycleEvents(flags: string): boolean {
  return flags.includes('K') && (flags.includes('d') || flags.includes('A'));
}

export function eventsDisabledMessage(flags: string): string {
  return (
    `the server's notify-keyspace-events is '${flags}': it needs K and d for the hashlock lifecycle events ` +
    "an Election observer (and the event-driven loss signal) listens to; set it with " +
    '`CONFIG SET notify-keyspace-events Kd` (or `notify-keyspace-events Kd` in redis.conf)'
  );
}

type Callback = (event: string) => void;

/** One callback on one channel; close() ends it. */
export class Subscription {
  constructor(
    private readonly hub: Hub,
    readonly channel: string,
    readonly callback: Callback,
  ) {}

  close(): void {
    this.hub.unsubscribe(this);
  }
}

/** A subscriber connection to one node. */
export class Hub {
  private readonly subs = new Map<string, Subscription[]>();
  private readonly confirmed = new Map<string, Promise<void>>();
  private conn?: Promise<Subscriber>;
  private flagsSeen?: string | null;

  constructor(
    private readonly pool: ConnectionPool,
    private readonly key: string,
  ) {}

  /** The node's notify-keyspace-events (null: CONFIG GET refused). */
  async flags(): Promise<string | null> {
    if (this.flagsSeen === undefined) {
      const d = new Dedicated(this.pool, this.key);
      try {
        const reply = await d.call(['CONFIG', 'GET', 'notify-keyspace-events']);
        d.giveBack();
        const values = reply instanceof Map ? [...reply.values()] : Array.isArray(reply) ? reply.filter((_, i) => i % 2 === 1) : Object.values(reply as object);
        this.flagsSeen = values.length ? String(values[0]) : null;
      } catch {
        d.close();
        this.flagsSeen = null;
      }
    }
    return this.flagsSeen;
  }

  refreshFlags(): void {
    this.flagsSeen = undefined;
  }

  private connection(): Promise<Subscriber> {
    if (!this.conn) {
      const adapter = this.pool.adapter;
      if (!adapter.subscriber) return Promise.reject(new Error('hashlock: this client adapter cannot subscribe'));
      const conn = adapter.subscriber(this.key);
      this.conn = conn;
      conn.then(
        (c) =>
          c.onEnd(() => {
            // Every subscriber is told (event ''); the next subscribe connects again.
            if (this.conn === conn) this.conn = undefined;
            const all = [...this.subs.values()].flat();
            this.subs.clear();
            this.confirmed.clear();
            for (const s of all) s.callback('');
          }),
        () => {
          if (this.conn === conn) this.conn = undefined;
        },
      );
    }
    return this.conn;
  }

  /** `callback(event)` for every message on `channel` until closed; resolves once the server confirmed it. */
  async subscribe(channel: string, callback: Callback): Promise<Subscription> {
    const sub = new Subscription(this, channel, callback);
    const conn = await this.connection();
    let list = this.subs.get(channel);
    if (!list) {
      this.subs.set(channel, (list = []));
      const ok = conn.subscribe(channel, (m) => {
        for (const s of [...(this.subs.get(channel) ?? [])]) {
          try {
            s.callback(m);
          } catch {
            // a callback's error is its own
          }
        }
      });
      this.confirmed.set(channel, ok);
    }
    list.push(sub);
    await this.confirmed.get(channel);
    return sub;
  }

  unsubscribe(sub: Subscription): void {
    const list = this.subs.get(sub.channel);
    const i = list?.indexOf(sub) ?? -1;
    if (!list || i < 0) return;
    list.splice(i, 1);
    if (list.length === 0) {
      this.subs.delete(sub.channel);
      this.confirmed.delete(sub.channel);
      void this.conn?.then((c) => c.unsubscribe(sub.channel)).catch(() => {});
    }
  }

  /** Closes the subscriber connection (the client is done). */
  close(): void {
    void this.conn?.then((c) => c.close()).catch(() => {});
    this.conn = undefined;
  }
}

const HUBS = new WeakMap<ConnectionPool, Map<string, Hub>>();

/** The hub of the node serving `key`, and the key's keyspace channel. */
export function hubFor(pool: ConnectionPool, key: string): { hub: Hub; channel: string } {
  let hubs = HUBS.get(pool);
  if (!hubs) {
    HUBS.set(pool, (hubs = new Map()));
    pool.onClose.push(() => closeHubs(pool));
  }
  const node = pool.adapter.nodeFor?.(key);
  const id = node ? `${node.host}:${node.port}` : '';
  let hub = hubs.get(id);
  if (!hub) hubs.set(id, (hub = new Hub(pool, key)));
  return { hub, channel: `__keyspace@${pool.adapter.database?.() ?? 0}__:${key}` };
}

/** Closes the subscriber connections the library keeps for a pool. */
export function closeHubs(pool: ConnectionPool): void {
  for (const hub of HUBS.get(pool)?.values() ?? []) hub.close();
}

/**
 * Events on `key` for a loss watch; close() ends it. Nothing when the server
 * does not send them (the watch's periodic check remains) or cannot be asked.
 */
export class Follower {
  private sub?: Subscription;
  private closed = false;

  constructor(pool: ConnectionPool, key: string, callback: Callback) {
    if (!pool.adapter.subscriber) return;
    const { hub, channel } = hubFor(pool, key);
    void (async () => {
      try {
        const flags = await hub.flags();
        if (flags !== null && !hearsLifecycleEvents(flags)) return;
        const sub = await hub.subscribe(channel, callback);
        if (this.closed) return sub.close();
        this.sub = sub;
        // What happened between the grant and the subscription (a FORCERELEASE, say) sent no event
        // to this watch: one check now (the event is not QUIET).
        callback(SUBSCRIBED);
      } catch {
        // no events: the periodic check remains
      }
    })();
  }

  close(): void {
    this.closed = true;
    this.sub?.close();
    this.sub = undefined;
  }
}
