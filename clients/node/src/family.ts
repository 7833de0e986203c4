/**
 * The rest of the family: Semaphore (and its Lease), Latch, ReadWriteLock,
 * MultiLock, Election. Each waits in the server's queue on a connection of
 * the library's own; an aborted wait is never granted.
 */

import { randomUUID } from 'node:crypto';

import type { Client } from './adapters';
import { EventsDisabledError, LockLostError, translate } from './errors';
import { eventsDisabledMessage, hearsLifecycleEvents, hubFor, type Subscription } from './events';
import { Lock } from './lock';
import { Dedicated } from './pool';
import { DEFAULT_LEASE_MS, renewArgs, toInt, type Arg } from './protocol';
import { abortable, blockMs, isReplyError, Tenure, timeoutError, withOptions, type TenureOptions, type WaitOptions } from './tenure';

const text = (v: unknown) => (Buffer.isBuffer(v) ? v.toString() : String(v));

/** A map reply (RESP3 Map or object) or a flat field/value array (RESP2). */
function fields(reply: unknown): Map<string, unknown> {
  const f = new Map<string, unknown>();
  if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) f.set(text(reply[i]), reply[i + 1]);
  else if (reply instanceof Map) for (const [k, v] of reply) f.set(text(k), v);
  else if (reply && typeof reply === 'object') for (const [k, v] of Object.entries(reply)) f.set(k, v);
  return f;
}

function countOption(count: number | undefined): number {
  const n = count ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new RangeError('count must be an integer >= 1');
  return n;
}

// -- semaphores ------------------------------------------------------------------

export interface SemaphoreInfo {
  available: number;
  leased: number;
  waiters: number;
  keepalive: number;
  /** -1: no expiry. */
  ttlMs: number;
}

/**
 * A semaphore at `name` (SEMAPHORE.*; Redisson's RSemaphore and
 * RPermitExpirableSemaphore share it). Waits queue in the server, first come
 * first served. acquire()/release(): anonymous permits (no owner: they come
 * back only by release()). lease(): permits with ids, tied by default to a
 * connection of the library's own (the server returns them the moment it
 * closes), returned by `await using` / withLease on exit, error or abort.
 */
export class Semaphore {
  readonly settings: TenureOptions;

  constructor(
    private readonly client: Client,
    readonly name: string,
    options: TenureOptions = {},
  ) {
    this.settings = options;
  }

  private get helper(): Lease {
    return new Lease(this.client, this.name, this.settings, 1);
  }

  private async exec(args: Arg[]): Promise<unknown> {
    return this.helper.run(args);
  }

  /** Sets the permit count if no semaphore exists yet (true), else changes nothing (false). */
  async create(permits: number, leaseMs?: number): Promise<boolean> {
    const args: Arg[] = ['SEMAPHORE.CREATE', this.name, String(permits)];
    if (leaseMs !== undefined) args.push('PX', String(leaseMs));
    return toInt(await this.exec(args)) === 1;
  }

  /** Adds `delta` permits (may be negative); the permits available. */
  async add(delta: number): Promise<number> {
    return toInt(await this.exec(['SEMAPHORE.ADD', this.name, String(delta)]));
  }

  async drain(): Promise<number> {
    return toInt(await this.exec(['SEMAPHORE.DRAIN', this.name]));
  }

  async info(): Promise<SemaphoreInfo | null> {
    const reply = await this.exec(['SEMAPHORE.INFO', this.name]);
    if (reply === null || reply === undefined) return null;
    const f = fields(reply);
    return { available: toInt(f.get('available')), leased: toInt(f.get('leased')), waiters: toInt(f.get('waiters')), keepalive: toInt(f.get('keepalive')), ttlMs: toInt(f.get('ttl')) };
  }

  async available(): Promise<number> {
    return (await this.info())?.available ?? 0;
  }

  /**
   * Takes `count` anonymous permits; false if the wait ended without them.
   * An aborted wait never keeps permits: the library ends it on the server
   * (CLIENT UNBLOCK) and gives back a grant that was already on its way.
   */
  async acquire(options: WaitOptions & { count?: number } = {}): Promise<boolean> {
    options.signal?.throwIfAborted();
    const count = countOption(options.count);
    const block = blockMs(options);
    const replicas = this.helper.replicas;
    const args = withOptions(['SEMAPHORE.ACQUIRE', this.name, 'COUNT', String(count)], { blockMs: block, replicas });
    if (block === undefined) return (await this.exec(args)) !== null;
    const conn = new Dedicated(this.helper.pooled, this.name);
    try {
      await conn.clientId(); // known before the wait: see settleAbandoned
    } catch (e) {
      if (isReplyError(e)) conn.giveBack();
      else conn.close();
      throw translate(e);
    }
    const wait = conn.call(args);
    let reply: unknown;
    try {
      reply = await abortable(wait, options.signal, () => void settleAbandoned(conn, wait, this.name));
    } catch (e) {
      if (options.signal?.aborted && e === options.signal.reason) throw e;
      if (isReplyError(e)) conn.giveBack();
      else conn.close();
      throw translate(e);
    }
    conn.giveBack();
    return reply !== null && reply !== undefined;
  }

  /** Gives back `count` anonymous permits; the permits available. */
  async release(count?: number): Promise<number> {
    return toInt(await this.exec(['SEMAPHORE.RELEASE', this.name, 'COUNT', String(countOption(count))]));
  }

  /** Leases `count` permits (LockTimeoutError if the wait ends without them): `await using lease = await sem.lease()`. */
  async lease(options: WaitOptions & { count?: number } = {}): Promise<Lease> {
    const lease = new Lease(this.client, this.name, this.settings, countOption(options.count));
    if (!(await lease.take(options))) throw timeoutError(`semaphore ${this.name}: ${lease.count} permit(s)`, options);
    return lease;
  }

  /** Runs fn while holding leased permits (fn gets the lost signal); returns them after. */
  async withLease<T>(fn: (signal: AbortSignal) => Promise<T> | T, options: WaitOptions & { count?: number } = {}): Promise<T> {
    const lease = await this.lease(options);
    try {
      return await fn(lease.signal);
    } finally {
      await lease.release().catch(() => {});
    }
  }
}

/** An abandoned anonymous wait: unblock it (again, until its answer comes), give back what it was granted. */
async function settleAbandoned(conn: Dedicated, wait: Promise<unknown>, name: string): Promise<void> {
  let done = false;
  let reply: unknown = null;
  let failed = false;
  const settled = wait.then(
    (r) => {
      done = true;
      reply = r;
    },
    () => {
      done = true;
      failed = true;
    },
  );
  const helper = conn.sibling();
  try {
    const id = await conn.clientId();
    for (let i = 0; i < 100 && !done; i++) {
      await helper.call(['CLIENT', 'UNBLOCK', String(id)]);
      await Promise.race([settled, new Promise((r) => setTimeout(r, 100))]);
    }
    helper.giveBack();
  } catch {
    helper.close();
  }
  if (!done || failed) {
    conn.close();
    return;
  }
  try {
    if (reply !== null && reply !== undefined) await conn.call(['SEMAPHORE.RELEASE', name, 'COUNT', String(toInt(reply))]);
    conn.giveBack();
  } catch {
    conn.close();
  }
}

/** Leased permits of a Semaphore (`ids`); `signal` aborts if they are lost (returned without release()). */
export class Lease extends Tenure implements AsyncDisposable {
  ids: string[] = [];

  constructor(
    client: Client,
    name: string,
    options: TenureOptions,
    readonly count: number,
  ) {
    super(client, name, options);
  }

  get pooled() {
    return this.pool;
  }

  /** A plain command on the user's client (typed errors). */
  run(args: Arg[]): Promise<unknown> {
    return this.call(args);
  }

  protected describe(): string {
    return `lease of ${this.count} permit(s) of semaphore ${this.key}`;
  }

  protected renewArgs(keepalive: boolean): Arg[][] {
    return this.ids.map((id) => withOptions(['SEMAPHORE.RENEW', this.key, id, 'PX', String(this.leaseMs)], { keepalive, replicas: this.replicas }));
  }

  protected forget(): void {
    this.ids = [];
  }

  async take(options: WaitOptions): Promise<boolean> {
    const block = blockMs(options);
    const args = withOptions(['SEMAPHORE.LEASE', this.key, 'COUNT', String(this.count), 'PX', String(this.leaseMs)], { blockMs: block, keepalive: true, replicas: this.replicas });
    try {
      const ids = await this.wait(args, options.signal, (reply) => {
        if (reply === null || reply === undefined) return null;
        // Known before wait() unties them (keepalive: false renews this.ids without KEEPALIVE).
        this.ids = (reply as unknown[]).map(text);
        return this.ids;
      });
      return ids !== null;
    } catch (e) {
      this.ids = [];
      throw e;
    }
  }

  /** Returns the permits; how many. LockLostError if some were not leased any more (the others are returned all the same). */
  async release(): Promise<number> {
    const ids = [...this.ids];
    if (!ids.length) throw new LockLostError(`${this.describe()}: already returned or lost`);
    try {
      const n = toInt(await this.callHeld(['SEMAPHORE.RETURN', this.key, ...ids]));
      this.stop(false);
      return n;
    } catch (e) {
      if (e instanceof LockLostError) {
        for (const id of ids) await this.callHeld(['SEMAPHORE.RETURN', this.key, id]).catch(() => {});
        this.lose(e, false);
      }
      throw e;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.ids.length) await this.release();
  }
}

// -- latches ------------------------------------------------------------------------

/** A count-down latch at `name` (LATCH.*; Redisson's RCountDownLatch). */
export class Latch {
  private readonly lease: Lease;

  constructor(
    client: Client,
    readonly name: string,
  ) {
    this.lease = new Lease(client, name, {}, 1);
  }

  async create(count: number): Promise<boolean> {
    if (!Number.isInteger(count) || count < 1) throw new RangeError('count must be an integer >= 1');
    return toInt(await this.lease.run(['LATCH.CREATE', this.name, String(count)])) === 1;
  }

  /** Counts down once; the count left (0: open). */
  async countDown(): Promise<number> {
    return toInt(await this.lease.run(['LATCH.COUNTDOWN', this.name]));
  }

  async count(): Promise<number> {
    return toInt(await this.lease.run(['LATCH.COUNT', this.name]));
  }

  /** true once the latch is open; false if timeoutMs passed first. An aborted wait closes its connection. */
  async wait(options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<boolean> {
    options.signal?.throwIfAborted();
    const block = blockMs({ timeoutMs: options.timeoutMs });
    if (block === undefined) return (await this.lease.run(['LATCH.AWAIT', this.name])) !== null;
    const conn = new Dedicated(this.lease.pooled, this.name);
    let reply: unknown;
    try {
      reply = await abortable(conn.call(['LATCH.AWAIT', this.name, 'BLOCK', String(block)]), options.signal, () => conn.close());
    } catch (e) {
      if (isReplyError(e)) conn.giveBack();
      else conn.close();
      throw translate(e);
    }
    conn.giveBack();
    return reply !== null && reply !== undefined;
  }
}

// -- read-write locks -----------------------------------------------------------------

export interface RWLockInfo {
  mode: string;
  writer: string | null;
  writeHolds: number;
  readers: number;
  readHolds: number;
  ttlMs: number;
  waiters: number;
  keepalive: number;
}

/** One read or write hold: `await using`, or release(). */
export class ReadHold implements AsyncDisposable {
  readonly mode: 'READ' | 'WRITE' = 'READ';
  released = false;

  constructor(
    readonly rw: ReadWriteLock,
    /** The fencing token of a write acquisition (token: true). */
    readonly token?: bigint,
  ) {}

  async release(): Promise<number> {
    if (this.released) throw new LockLostError(`this ${this.mode} hold of ${this.rw.name} was already released`);
    this.released = true;
    return this.rw.release(this.mode);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.released) await this.release();
  }
}

export class WriteHold extends ReadHold {
  override readonly mode = 'WRITE' as const;

  /** Takes a read hold (at once: this owner writes) and gives this write hold back: no writer can come between. */
  async downgrade(): Promise<ReadHold> {
    if (this.released) throw new LockLostError(`this WRITE hold of ${this.rw.name} was already released`);
    const read = await this.rw.read({ blocking: false });
    await this.release();
    return read;
  }
}

/**
 * A read-write lock at `name` (RWLOCK.*; Redisson's RReadWriteLock): readers
 * share it, a writer has it alone, writers do not starve. One object is one
 * owner: its holds re-enter; write() then read() downgrades; read() then
 * write() rejects with NoUpgradeError. keepalive (default) ties every hold
 * of the owner to one connection of the library's own.
 */
export class ReadWriteLock extends Tenure {
  readonly owner: string;
  readonly token: boolean;
  private reads = 0;
  private writes = 0;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    client: Client,
    readonly name: string,
    options: TenureOptions & { owner?: string; token?: boolean } = {},
  ) {
    super(client, name, options);
    this.owner = options.owner ?? randomUUID();
    this.token = options.token ?? false;
  }

  get readHolds(): number {
    return this.reads;
  }

  get writeHolds(): number {
    return this.writes;
  }

  protected describe(): string {
    return `read-write lock ${this.name} held by ${this.owner}`;
  }

  protected renewArgs(keepalive: boolean): Arg[][] {
    return [withOptions(['RWLOCK.RENEW', this.name, this.owner, 'PX', String(this.leaseMs)], { keepalive, replicas: this.replicas })];
  }

  protected forget(): void {
    this.reads = this.writes = 0;
  }

  /** One operation at a time per object. */
  private serial<T>(f: () => Promise<T>): Promise<T> {
    const next = this.queue.then(f, f);
    this.queue = next.catch(() => {});
    return next;
  }

  /** Takes a READ or WRITE hold: its count (and token), or null if the wait ended without it. */
  acquire(mode: 'READ' | 'WRITE', options: WaitOptions = {}): Promise<{ count: number; token?: bigint } | null> {
    return this.serial(async () => {
      const token = this.token && mode === 'WRITE';
      const parse = (reply: unknown) => {
        if (reply === null || reply === undefined) return null;
        if (token) {
          const [c, t] = reply as unknown[];
          return { count: toInt(c), token: BigInt(text(t)) };
        }
        return { count: toInt(reply) };
      };
      let got: { count: number; token?: bigint } | null;
      if (this.reads + this.writes > 0) {
        const args = withOptions(['RWLOCK.ACQUIRE', this.name, this.owner, mode, 'PX', String(this.leaseMs)], { keepalive: this.keepalive && this.tied !== undefined });
        if (token) args.push('TOKEN');
        got = parse(await this.callHeld(args));
        const expected = (mode === 'WRITE' ? this.writes : this.reads) + 1;
        if (!got || got.count !== expected) {
          if (got) await this.call(['RWLOCK.RELEASE', this.name, this.owner, mode]).catch(() => {});
          const lost = this.lostError('a re-entry found it gone');
          this.lose(lost, false);
          throw lost;
        }
      } else {
        const args = withOptions(['RWLOCK.ACQUIRE', this.name, this.owner, mode, 'PX', String(this.leaseMs)], { blockMs: blockMs(options), keepalive: true });
        if (token) args.push('TOKEN');
        if (this.replicas) args.push('REPLICAS', String(this.replicas.n), String(this.replicas.timeoutMs));
        got = await this.wait(args, options.signal, parse);
        if (!got) return null;
      }
      if (mode === 'WRITE') this.writes = got.count;
      else this.reads = got.count;
      return got;
    });
  }

  /** Drops one hold of `mode`; the holds of that mode left. LockLostError if none (any more). */
  release(mode: 'READ' | 'WRITE'): Promise<number> {
    return this.serial(async () => {
      let left: number;
      try {
        left = toInt(await this.callHeld(['RWLOCK.RELEASE', this.name, this.owner, mode]));
      } catch (e) {
        if (e instanceof LockLostError && this.reads + this.writes > 0) this.lose(e, false);
        throw e;
      }
      if (mode === 'WRITE') this.writes = left;
      else this.reads = left;
      if (this.reads + this.writes === 0) this.stop(false);
      return left;
    });
  }

  /** A read hold; LockTimeoutError if the wait ended without it. */
  async read(options: WaitOptions = {}): Promise<ReadHold> {
    if (!(await this.acquire('READ', options))) throw timeoutError(`read-write lock ${this.name}: READ`, options);
    return new ReadHold(this);
  }

  /** A write hold (`token` with token: true); LockTimeoutError if the wait ended without it; NoUpgradeError if this owner holds READ only. */
  async write(options: WaitOptions = {}): Promise<WriteHold> {
    const got = await this.acquire('WRITE', options);
    if (!got) throw timeoutError(`read-write lock ${this.name}: WRITE`, options);
    return new WriteHold(this, got.token);
  }

  async info(): Promise<RWLockInfo | null> {
    const reply = await this.call(['RWLOCK.INFO', this.name]);
    if (reply === null || reply === undefined) return null;
    const f = fields(reply);
    const writer = f.get('writer');
    return {
      mode: text(f.get('mode')),
      writer: writer === null || writer === undefined || text(writer) === '' ? null : text(writer),
      writeHolds: toInt(f.get('writeholds')),
      readers: toInt(f.get('readers')),
      readHolds: toInt(f.get('readholds')),
      ttlMs: toInt(f.get('ttl')),
      waiters: toInt(f.get('waiters')),
      keepalive: toInt(f.get('keepalive')),
    };
  }
}

// -- multi-key locks ------------------------------------------------------------------

/**
 * Several locks taken all at once or not at all (LOCK.MACQUIRE /
 * LOCK.MRELEASE): no partial hold, no deadlock. In a cluster the names must
 * share a slot (a hash tag), else CrossSlotError.
 */
export class MultiLock extends Tenure implements AsyncDisposable {
  readonly owner: string;
  private count = 0;

  constructor(
    client: Client,
    readonly names: string[],
    options: TenureOptions & { owner?: string } = {},
  ) {
    if (!names.length) throw new RangeError('a MultiLock needs at least one name');
    super(client, names[0], options);
    this.owner = options.owner ?? randomUUID();
  }

  get holds(): number {
    return this.count;
  }

  protected describe(): string {
    return `multi-key lock [${this.names.join(', ')}] held by ${this.owner}`;
  }

  protected renewArgs(keepalive: boolean): Arg[][] {
    return this.names.map((n) => renewArgs(n, this.owner, { leaseMs: this.leaseMs, keepalive, token: false, replicas: this.replicas }, keepalive));
  }

  protected forget(): void {
    this.count = 0;
  }

  private args(block: number | undefined, keepalive: boolean): Arg[] {
    return withOptions(['LOCK.MACQUIRE', String(this.names.length), ...this.names, this.owner, 'PX', String(this.leaseMs)], { blockMs: block, keepalive, replicas: this.replicas });
  }

  /** Takes every lock at once (or re-enters them all); false if the wait ended without them (then none was taken). */
  async acquire(options: WaitOptions = {}): Promise<boolean> {
    const parse = (reply: unknown) => (reply === null || reply === undefined ? null : (reply as unknown[]).map(toInt));
    if (this.count > 0) {
      const counts = parse(await this.callHeld(this.args(undefined, this.keepalive && this.tied !== undefined)));
      if (!counts || counts.some((c) => c !== this.count + 1)) {
        if (counts) await this.callHeld(['LOCK.MRELEASE', String(this.names.length), ...this.names, this.owner]).catch(() => {});
        const lost = this.lostError('a re-entry found it gone');
        this.lose(lost, false);
        throw lost;
      }
      this.count += 1;
      return true;
    }
    const counts = await this.wait(this.args(blockMs(options), true), options.signal, parse);
    if (!counts) return false;
    this.count = Math.min(...counts);
    return true;
  }

  /** Drops one hold of every lock; the holds left. LockLostError if this owner does not hold every one (nothing changed). */
  async release(): Promise<number> {
    let left: number[];
    try {
      left = ((await this.callHeld(['LOCK.MRELEASE', String(this.names.length), ...this.names, this.owner])) as unknown[]).map(toInt);
    } catch (e) {
      if (e instanceof LockLostError && this.count > 0) this.lose(e, false);
      throw e;
    }
    this.count = Math.max(0, ...left);
    if (this.count === 0) this.stop(false);
    return this.count;
  }

  /** acquire, fn(signal), release. LockTimeoutError if not acquired. */
  async withLock<T>(fn: (signal: AbortSignal) => Promise<T> | T, options: WaitOptions = {}): Promise<T> {
    if (!(await this.acquire(options))) throw timeoutError(`multi-key lock [${this.names.join(', ')}]`, options);
    try {
      return await fn(this.signal);
    } finally {
      await this.release().catch(() => {});
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    while (this.count > 0) {
      try {
        await this.release();
      } catch {
        break;
      }
    }
  }
}

// -- leader election -------------------------------------------------------------------

export interface Leader {
  owner: string;
  /** The fencing token of the leader's winning acquisition: grows with every leader. */
  term: bigint;
}

export interface LeaderChange {
  /** 'elected': a new leader (`leader` set); 'vacant': the leadership ended (released, expired, forced, its connection closed). */
  kind: 'elected' | 'vacant';
  leader: Leader | null;
  /** The event that made it seen. */
  event: string;
}

export interface ElectionOptions {
  owner?: string;
  leaseMs?: number;
  onElected?: (term: bigint) => void;
  /** Leadership lost without resign() (its connection closed, a FORCERELEASE, an expiry). */
  onRevoked?: (err: LockLostError) => void;
}

/**
 * Leader election on the lock `name`: campaign() waits in the server's
 * queue (LOCK.ACQUIRE ... KEEPALIVE BLOCK TOKEN) and resolves with the term
 * (the winning acquisition's fencing token). A leader that dies is replaced
 * at once by the next candidate. `signal` aborts when the leadership is lost.
 * observe() follows who leads from lifecycle events, never polling.
 */
export class Election {
  private readonly lock: Lock;
  private revokedWatch?: () => void;

  constructor(
    private readonly client: Client,
    readonly name: string,
    private readonly options: ElectionOptions = {},
  ) {
    this.lock = new Lock(client, name, { keepalive: true, token: true, owner: options.owner, leaseMs: options.leaseMs ?? DEFAULT_LEASE_MS });
  }

  get owner(): string {
    return this.lock.owner;
  }

  /** True while this candidate leads, as far as it knows. */
  get isLeader(): boolean {
    return this.lock.holds > 0 && !this.lock.signal.aborted;
  }

  get term(): bigint | undefined {
    return this.isLeader ? this.lock.token : undefined;
  }

  /** Aborted when the current leadership is lost. */
  get signal(): AbortSignal {
    return this.lock.signal;
  }

  /** Waits to lead; resolves with the term. LockTimeoutError if the wait ended first. */
  async campaign(options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<bigint> {
    if (this.isLeader) return this.lock.token!;
    if (!(await this.lock.acquire(options))) throw timeoutError(`election ${this.name}`, options);
    const term = this.lock.token!;
    const signal = this.lock.signal;
    const onRevoked = this.options.onRevoked;
    if (onRevoked) {
      const listener = () => onRevoked(signal.reason as LockLostError);
      signal.addEventListener('abort', listener, { once: true });
      this.revokedWatch = () => signal.removeEventListener('abort', listener);
    }
    this.options.onElected?.(term);
    return term;
  }

  /** Stops leading (the next candidate is elected at once). */
  async resign(): Promise<void> {
    this.revokedWatch?.();
    this.revokedWatch = undefined;
    while (this.lock.holds > 0) await this.lock.release();
  }

  /** Who leads now, and in which term; null when no one does. */
  async leader(): Promise<Leader | null> {
    const info = await this.lock.info();
    return info ? { owner: info.owner, term: info.token ?? 0n } : null;
  }

  /**
   * Follows who leads: `for await (const change of election.observe())`.
   * Rejects with EventsDisabledError at once if the server does not deliver
   * the events. Changes closer together than a round trip may be reported
   * as one (the terms show it). close() (or leaving the loop) stops it.
   */
  observe(): Observer {
    return new Observer(this.client, this);
  }
}

export class Observer implements AsyncIterable<LeaderChange> {
  private readonly changes: (LeaderChange | null)[] = [];
  private waiting?: () => void;
  private sub?: Subscription;
  private last: Leader | null = null;
  private closed = false;
  private started?: Promise<void>;
  private chain: Promise<void> = Promise.resolve();
  private error?: unknown;

  constructor(
    private readonly client: Client,
    private readonly election: Election,
  ) {}

  /** Subscribes (EventsDisabledError if the server does not deliver the events); iterating starts it too. */
  start(): Promise<void> {
    this.started ??= (async () => {
      const pool = (this.election as unknown as { lock: { pool: import('./pool').ConnectionPool } }).lock.pool;
      const { hub, channel } = hubFor(pool, this.election.name);
      hub.refreshFlags();
      const flags = await hub.flags();
      if (flags !== null && !hearsLifecycleEvents(flags)) throw new EventsDisabledError(eventsDisabledMessage(flags));
      const onEvent = (event: string) => {
        this.chain = this.chain.then(() => this.advance(event, hub, channel, onEvent));
      };
      this.sub = await hub.subscribe(channel, onEvent);
      onEvent('(start)');
    })();
    return this.started;
  }

  private async advance(event: string, hub: import('./events').Hub, channel: string, onEvent: (e: string) => void): Promise<void> {
    if (this.closed) return;
    try {
      if (event === '') {
        this.sub = await hub.subscribe(channel, onEvent);
        event = '(resubscribed)';
      }
      const now = await this.election.leader();
      const last = this.last;
      if (now?.term === last?.term) return;
      if (last) this.push({ kind: 'vacant', leader: null, event });
      if (now) this.push({ kind: 'elected', leader: now, event });
      this.last = now;
    } catch (e) {
      this.error = e;
      this.push(null);
    }
  }

  private push(change: LeaderChange | null): void {
    this.changes.push(change);
    this.waiting?.();
  }

  /** The next change (null once closed). */
  async next(): Promise<LeaderChange | null> {
    await this.start();
    while (!this.changes.length) {
      if (this.closed) return null;
      await new Promise<void>((r) => (this.waiting = r));
    }
    const change = this.changes.shift()!;
    if (change === null && this.error) throw translate(this.error);
    return change;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<LeaderChange> {
    try {
      for (;;) {
        const change = await this.next();
        if (change === null) return;
        yield change;
      }
    } finally {
      this.close();
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.sub?.close();
    this.push(null);
  }
}

