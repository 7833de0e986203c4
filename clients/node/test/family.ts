/**
 * The rest of the family (Semaphore and its Lease, Latch, ReadWriteLock,
 * MultiLock, Election), registered per client library (node-redis.test.ts,
 * ioredis.test.ts) and per server, against servers running with
 * `notify-keyspace-events Kd` (an Election observer and the event-driven
 * loss signal listen to the module's lifecycle events). Tests whose name
 * starts with "[module feature]" use KEEPALIVE, TOKEN or the events.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import {
  adapt,
  Election,
  EventsDisabledError,
  Latch,
  Lock,
  LockLostError,
  LockTimeoutError,
  MultiLock,
  NotLatchError,
  NotSemaphoreError,
  NoUpgradeError,
  parseInfo,
  ReadWriteLock,
  Semaphore,
  WrongTypeError,
  type Adapter,
  type LeaderChange,
  type RWLockInfo,
  type SemaphoreInfo,
} from '../src';
import { connectClient, type Flavour } from './clients';
import { KINDS, Server } from './servers';

const WAIT_MS = 10_000;
const FEATURE = '[module feature]';
/** No test may hang the run. */
const LIMIT = { timeout: 60_000 };
/** Abandoned waits racing a release, per object. */
const TRIALS = 60;
/** Forced takeovers of a leader, per server. */
const TAKEOVERS = 200;
/** The servers' notify-keyspace-events, as the shipped redis.conf has it. */
export const EVENTS = ['--notify-keyspace-events', 'Kd'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const key = (tag: string) => `family:${tag}:${randomUUID().slice(0, 8)}`;

async function until(f: () => Promise<boolean> | boolean, ms = WAIT_MS): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await f()) return true;
    await sleep(5);
  }
  return f();
}

/** The server-side id of the connection a hold is tied to (white box: `tied` is the library's own). */
function tiedId(holder: object): Promise<number> {
  const tied = (holder as { tied?: { clientId(): Promise<number> } }).tied;
  assert.ok(tied, 'the hold is tied to a connection');
  return tied.clientId();
}

export function defineFamilySuite(flavour: Flavour) {
  for (const kind of KINDS) {
    let server: Server;
    let client: object;
    let admin: Adapter;
    let closeClient: () => void;
    before(async () => {
      server = await Server.start(kind, EVENTS);
      ({ client, close: closeClient } = await connectClient(flavour, server.port));
      admin = adapt(client);
    });
    after(() => {
      closeClient?.();
      server?.stop();
    });
    const name = (prefix: string, what: string) => `${prefix}${flavour} ${kind}: ${what}`;

    const semInfo = async (k: string): Promise<SemaphoreInfo> => (await new Semaphore(admin, k).info())!;
    const rwInfo = (k: string): Promise<RWLockInfo | null> => new ReadWriteLock(admin, k).info();
    const lockWaiters = async (k: string) => parseInfo(await admin.call(['LOCK.INFO', k]))?.waiters ?? 0;

    // -- semaphores --------------------------------------------------------------

    test(name('', 'Semaphore: anonymous permits, create once, FIFO handoff'), LIMIT, async () => {
      const k = key('sem');
      const sem = new Semaphore(client, k);
      assert.equal(await sem.create(2), true);
      assert.equal(await sem.create(5), false, 'create changes nothing once it exists');
      assert.equal(await sem.available(), 2);
      assert.equal(await sem.acquire({ blocking: false }), true);
      assert.equal(await sem.available(), 1);
      assert.equal(await sem.acquire({ blocking: false, count: 2 }), false);
      const started = Date.now();
      assert.equal(await sem.acquire({ count: 2, timeoutMs: 200 }), false);
      assert.ok(Date.now() - started >= 190);
      assert.equal((await semInfo(k)).waiters, 0, 'a timed-out wait left the queue');
      assert.equal(await sem.acquire({ blocking: false }), true);
      const waiting = sem.acquire({ timeoutMs: WAIT_MS, count: 2 });
      assert.ok(await until(async () => (await semInfo(k)).waiters === 1));
      assert.equal(await sem.release(), 1);
      assert.equal(await sem.release(), 0, 'the queued wait for 2 took both');
      assert.equal(await waiting, true);
      assert.equal(await sem.release(2), 2);
      assert.equal(await sem.add(3), 5);
      assert.equal(await sem.drain(), 5);
      assert.equal(await sem.available(), 0);
      await assert.rejects(sem.acquire({ count: 0 }), RangeError);
    });

    test(name(FEATURE + ' ', 'Semaphore lease: KEEPALIVE, returned on dispose and on error, permits conserved'), LIMIT, async () => {
      const k = key('lease');
      const sem = new Semaphore(client, k);
      assert.equal(await sem.create(3), true);
      {
        await using lease = await sem.lease({ count: 2 });
        assert.equal(lease.ids.length, 2);
        assert.equal(lease.signal.aborted, false);
        const info = await semInfo(k);
        assert.deepEqual([info.available, info.leased, info.keepalive], [1, 2, 2]);
        await assert.rejects(sem.lease({ count: 2, timeoutMs: 100 }), LockTimeoutError);
        await assert.rejects(sem.lease({ count: 2, blocking: false }), LockTimeoutError);
      }
      assert.deepEqual([(await semInfo(k)).available, (await semInfo(k)).leased], [3, 0], 'returned on dispose');
      await assert.rejects(
        sem.withLease(async (signal) => {
          assert.equal(signal.aborted, false);
          assert.equal((await semInfo(k)).leased, 1);
          throw new Error('boom');
        }),
        /boom/,
      );
      assert.deepEqual([(await semInfo(k)).available, (await semInfo(k)).leased], [3, 0], 'returned after an error');
      assert.equal(await sem.withLease(async () => 7, { count: 3 }), 7);

      // A lease waits in the queue and is handed the permits a release frees.
      const first = await sem.lease({ count: 3 });
      const waiting = sem.lease({ count: 2, timeoutMs: WAIT_MS });
      assert.ok(await until(async () => (await semInfo(k)).waiters === 1));
      assert.equal(await first.release(), 3);
      const second = await waiting;
      assert.deepEqual([(await semInfo(k)).available, (await semInfo(k)).leased], [1, 2]);
      await assert.rejects(first.release(), LockLostError, 'already returned');

      // Its connection ends (CLIENT KILL): the server returns the permits at once, the signal aborts.
      const signal = second.signal;
      await admin.call(['CLIENT', 'KILL', 'ID', String(await tiedId(second))]);
      assert.ok(await until(() => signal.aborted, 2_000), 'the lost lease aborted its signal');
      assert.ok(signal.reason instanceof LockLostError);
      assert.ok(await until(async () => (await semInfo(k)).available === 3, 2_000), 'the server returned them at once');
      assert.equal((await semInfo(k)).leased, 0);
      await assert.rejects(second.release(), LockLostError);
    });

    test(name('', 'Semaphore lease with keepalive: false (a watchdog renews it)'), LIMIT, async () => {
      const k = key('lease-watchdog');
      const sem = new Semaphore(client, k, { keepalive: false, leaseMs: 300 });
      assert.equal(await sem.create(1), true);
      const lease = await sem.lease();
      assert.equal((await semInfo(k)).keepalive, 0);
      await sleep(1000); // three leases
      assert.equal((await semInfo(k)).leased, 1, 'renewed');
      assert.equal(await lease.release(), 1);
      assert.deepEqual([(await semInfo(k)).available, (await semInfo(k)).leased], [1, 0]);
    });

    // -- latches -----------------------------------------------------------------

    test(name('', 'Latch: countDown opens it, wait with a timeout'), LIMIT, async () => {
      const k = key('latch');
      const latch = new Latch(client, k);
      assert.equal(await latch.create(2), true);
      assert.equal(await latch.create(5), false);
      assert.equal(await latch.count(), 2);
      const started = Date.now();
      assert.equal(await latch.wait({ timeoutMs: 200 }), false);
      assert.ok(Date.now() - started >= 190);
      const waiting = [latch.wait({ timeoutMs: WAIT_MS }), new Latch(client, k).wait({ timeoutMs: WAIT_MS })];
      await sleep(50);
      assert.equal(await latch.countDown(), 1);
      assert.equal(await latch.countDown(), 0);
      assert.deepEqual(await Promise.all(waiting), [true, true]);
      assert.equal(await latch.count(), 0);
      assert.equal(await latch.wait({ timeoutMs: 100 }), true, 'an open latch answers at once');
      await assert.rejects(latch.create(0), RangeError);

      const closed = key('latch-abort');
      const other = new Latch(client, closed);
      await other.create(1);
      await assert.rejects(other.wait({ timeoutMs: WAIT_MS, signal: AbortSignal.timeout(100) }), (e: Error) => e.name === 'TimeoutError');
      assert.equal(await other.count(), 1);
    });

    // -- read-write locks ---------------------------------------------------------

    test(name(FEATURE + ' ', 'ReadWriteLock: readers share, a writer excludes, writers do not starve'), LIMIT, async () => {
      const k = key('rw');
      const a = new ReadWriteLock(client, k);
      const b = new ReadWriteLock(client, k);
      const w = new ReadWriteLock(client, k);
      const ra = await a.read();
      const rb = await b.read({ blocking: false });
      let info = (await rwInfo(k))!;
      assert.deepEqual([info.mode, info.readers, info.writer], ['read', 2, null]);
      await assert.rejects(w.write({ blocking: false }), LockTimeoutError);
      await assert.rejects(w.write({ timeoutMs: 100 }), LockTimeoutError);
      const writing = w.write({ timeoutMs: WAIT_MS });
      assert.ok(await until(async () => (await rwInfo(k))?.waiters === 1));
      await assert.rejects(new ReadWriteLock(client, k).read({ timeoutMs: 100 }), LockTimeoutError, 'a new reader waits behind the writer');
      assert.equal(await ra.release(), 0);
      await ra[Symbol.asyncDispose](); // released already: nothing to do
      await rb[Symbol.asyncDispose]();
      const wh = await writing;
      info = (await rwInfo(k))!;
      assert.deepEqual([info.mode, info.writer, info.writeHolds, info.keepalive > 0], ['write', w.owner, 1, true]);
      await assert.rejects(a.read({ blocking: false }), LockTimeoutError);
      await assert.rejects(b.write({ timeoutMs: 50 }), LockTimeoutError);
      // The writer re-enters, and may read.
      const again = await w.write({ blocking: false });
      assert.equal(w.writeHolds, 2);
      await again.release();
      await assert.rejects(again.release(), LockLostError, 'a hold is released once');
      assert.equal(await wh.release(), 0);
      assert.equal(await rwInfo(k), null);
    });

    test(name(FEATURE + ' ', 'ReadWriteLock: downgrade without a gap; read then write is NoUpgradeError'), LIMIT, async () => {
      const k = key('rw-down');
      const rw = new ReadWriteLock(client, k, { token: true });
      const other = new ReadWriteLock(client, k);
      const wh = await rw.write();
      assert.equal(typeof wh.token, 'bigint');
      const writing = other.write({ timeoutMs: WAIT_MS });
      assert.ok(await until(async () => (await rwInfo(k))?.waiters === 1));
      const rh = await wh.downgrade();
      let info = (await rwInfo(k))!;
      assert.deepEqual([info.mode, info.readers, info.writer], ['read', 1, null], 'the queued writer did not come between');
      assert.deepEqual([rw.readHolds, rw.writeHolds], [1, 0]);
      await assert.rejects(wh.downgrade(), LockLostError);
      const r2 = await new ReadWriteLock(client, k).read({ timeoutMs: 100 }).catch((e) => e);
      assert.ok(r2 instanceof LockTimeoutError, 'a new reader queues behind the waiting writer');

      await assert.rejects(rw.write({ blocking: false }), NoUpgradeError);
      await assert.rejects(rw.write({ timeoutMs: 1000 }), NoUpgradeError);
      info = (await rwInfo(k))!;
      assert.deepEqual([info.mode, info.readers, info.readHolds, rw.readHolds, rw.writeHolds], ['read', 1, 1, 1, 0], 'nothing changed');
      await rh.release();
      const owh = await writing;
      assert.equal((await rwInfo(k))?.writer, other.owner);
      await owh.release();
      const next = await rw.write();
      assert.ok(next.token! > wh.token!, 'a later write has a larger token');
      await next.release();
      assert.equal(await rwInfo(k), null);
    });

    test(name(FEATURE + ' ', 'ReadWriteLock: a killed connection loses the holds, the signal aborts'), LIMIT, async () => {
      const k = key('rw-lost');
      const rw = new ReadWriteLock(client, k);
      await rw.read();
      const signal = rw.signal;
      await admin.call(['CLIENT', 'KILL', 'ID', String(await tiedId(rw))]);
      assert.ok(await until(() => signal.aborted, 2_000));
      assert.ok(signal.reason instanceof LockLostError);
      assert.equal(await rwInfo(k), null);
      assert.deepEqual([rw.readHolds, rw.writeHolds], [0, 0]);
      // Usable again.
      const w = await rw.write();
      assert.equal(rw.signal.aborted, false);
      await w.release();
    });

    // -- multi-key locks ----------------------------------------------------------

    test(name(FEATURE + ' ', 'MultiLock: all or nothing, re-entry, release'), LIMIT, async () => {
      const t = key('multi');
      const names = [`{${t}}:a`, `{${t}}:b`, `{${t}}:c`];
      const m = new MultiLock(client, names);
      const blocker = new Lock(client, names[1]);
      assert.equal(await blocker.acquire(), true);
      assert.equal(await m.acquire({ blocking: false }), false);
      assert.equal(await m.acquire({ timeoutMs: 100 }), false);
      for (const n of [names[0], names[2]]) assert.equal(await admin.call(['LOCK.INFO', n]), null, `${n}: no partial hold`);
      const waiting = m.acquire({ timeoutMs: WAIT_MS });
      assert.ok(await until(async () => (await lockWaiters(names[1])) === 1));
      assert.equal(await admin.call(['LOCK.INFO', names[0]]), null, 'a queued MultiLock holds nothing');
      assert.equal(await blocker.release(), 0);
      assert.equal(await waiting, true);
      for (const n of names) {
        const info = parseInfo(await admin.call(['LOCK.INFO', n]));
        assert.deepEqual([info?.owner, info?.holds, info?.keepalive], [m.owner, 1, true]);
      }
      assert.equal(await m.acquire(), true);
      assert.equal(m.holds, 2);
      assert.equal(await m.release(), 1);
      assert.equal(await m.release(), 0);
      for (const n of names) assert.equal(await admin.call(['LOCK.INFO', n]), null);
      await assert.rejects(m.release(), LockLostError);
      assert.equal(await m.withLock(async (signal) => !signal.aborted), true);
      {
        await using held = m;
        assert.equal(await held.acquire(), true);
      }
      for (const n of names) assert.equal(await admin.call(['LOCK.INFO', n]), null, 'disposed');
      assert.throws(() => new MultiLock(client, []), RangeError);
    });

    test(name(FEATURE + ' ', 'MultiLock: opposite key orders are both granted in turn'), LIMIT, async () => {
      const t = key('orders');
      const names = [`{${t}}:x`, `{${t}}:y`];
      const counts = [0, 0];
      let inside = 0;
      let overlapped = 0;
      const clients = await Promise.all([0, 1, 2, 3].map(() => connectClient(flavour, server.port)));
      try {
        await Promise.all(
          clients.map(async ({ client: c }, i) => {
            const m = new MultiLock(c, i % 2 ? names : [...names].reverse());
            for (let j = 0; j < 20; j++) {
              await m.withLock(
                async () => {
                  if (++inside > 1) overlapped++;
                  await sleep(1);
                  counts[i % 2]++;
                  inside--;
                },
                { timeoutMs: WAIT_MS },
              );
            }
          }),
        );
      } finally {
        for (const c of clients) c.close();
      }
      assert.deepEqual(counts, [40, 40]);
      assert.equal(overlapped, 0);
    });

    // -- typed errors --------------------------------------------------------------

    test(name('', 'errors are typed: NotSemaphoreError, NotLatchError, WrongTypeError'), LIMIT, async () => {
      const k = key('errors');
      await admin.call(['SET', k, 'x']);
      await assert.rejects(new Semaphore(client, k).acquire({ blocking: false }), NotSemaphoreError);
      await assert.rejects(new Semaphore(client, k).release(), NotSemaphoreError);
      await assert.rejects(new Semaphore(client, k).lease({ timeoutMs: 100 }), NotSemaphoreError);
      await assert.rejects(new Latch(client, k).countDown(), NotLatchError);
      await assert.rejects(new Latch(client, k).wait({ timeoutMs: 100 }), NotLatchError);
      await assert.rejects(new ReadWriteLock(client, k).read({ timeoutMs: 100 }), WrongTypeError);
      await assert.rejects(new MultiLock(client, [k]).acquire({ timeoutMs: 100 }), WrongTypeError);
      const list = key('errors-list');
      await admin.call(['RPUSH', list, 'x']);
      await assert.rejects(new Semaphore(client, list).available(), WrongTypeError);
      await assert.rejects(new Latch(client, list).count(), WrongTypeError);
      // A read-write lock is not a semaphore, and a failed call holds nothing.
      const rwk = key('errors-rw');
      const rw = new ReadWriteLock(client, rwk);
      const h = await rw.read();
      await assert.rejects(new Semaphore(client, rwk).acquire({ blocking: false }), WrongTypeError);
      await h.release();
      assert.equal(Number(await admin.call(['EXISTS', rwk])), 0);
    });

    // -- abandoned waits -----------------------------------------------------------

    /**
     * A wait abandoned in the same tick as the release that would grant it
     * (in turns in either order), on clients of their own; nothing may be
     * kept and nothing lost: `settled()` says what the server shows once
     * it is over.
     */
    async function abandonRace(o: {
      take: (c: object, k: string) => Promise<() => Promise<unknown>>;
      wait: (c: object, k: string, signal: AbortSignal) => Promise<(() => Promise<unknown>) | null>;
      queued: (k: string) => Promise<boolean>;
      settled: (k: string) => Promise<boolean>;
      reset: (k: string) => Promise<unknown>;
    }) {
      const h = await connectClient(flavour, server.port);
      const w = await connectClient(flavour, server.port);
      let kept = 0;
      let granted = 0;
      try {
        for (let trial = 0; trial < TRIALS; trial++) {
          const k = key('race');
          const release = await o.take(h.client, k);
          const controller = new AbortController();
          const waiting = o.wait(w.client, k, controller.signal).catch(() => null);
          assert.ok(await until(() => o.queued(k), 5_000), `trial ${trial}: queued`);
          let releasing: Promise<unknown>;
          if (trial % 2) {
            releasing = release();
            controller.abort();
          } else {
            controller.abort();
            releasing = release();
          }
          await releasing;
          const got = await waiting;
          if (got) {
            granted++; // the grant arrived before the abort: its own, given back normally
            await got();
          }
          if (!(await until(() => o.settled(k), 3_000))) {
            kept++;
            await o.reset(k);
            if (kept === 3) break; // failed: no need to wait out every trial
          }
        }
      } finally {
        h.close();
        w.close();
      }
      assert.equal(kept, 0, `an abandoned wait kept (or lost) something in ${kept} of ${TRIALS} trials (${granted} granted before the abort)`);
      assert.ok(granted < TRIALS, 'some waits were abandoned (else the race tested nothing)');
    }

    const semSettled = async (k: string) => {
      const i = await semInfo(k);
      return i.available === 1 && i.leased === 0 && i.waiters === 0;
    };

    test(name('', `Semaphore.acquire: an abandoned wait racing a release keeps nothing, ${TRIALS} trials`), LIMIT, async () => {
      await abandonRace({
        take: async (c, k) => {
          const sem = new Semaphore(c, k);
          await sem.create(1);
          assert.equal(await sem.acquire({ blocking: false }), true);
          return () => sem.release();
        },
        wait: async (c, k, signal) => {
          const sem = new Semaphore(c, k);
          return (await sem.acquire({ timeoutMs: 30_000, signal })) ? () => sem.release() : null;
        },
        queued: async (k) => (await semInfo(k)).waiters === 1,
        settled: semSettled,
        reset: (k) => admin.call(['DEL', k]),
      });
    });

    test(name(FEATURE + ' ', `Semaphore.lease: an abandoned wait racing a return keeps nothing, ${TRIALS} trials`), LIMIT, async () => {
      await abandonRace({
        take: async (c, k) => {
          const sem = new Semaphore(c, k);
          await sem.create(1);
          const lease = await sem.lease();
          return () => lease.release();
        },
        wait: async (c, k, signal) => {
          const lease = await new Semaphore(c, k).lease({ timeoutMs: 30_000, signal });
          return () => lease.release();
        },
        queued: async (k) => (await semInfo(k)).waiters === 1,
        settled: semSettled,
        reset: (k) => admin.call(['DEL', k]),
      });
    });

    test(name(FEATURE + ' ', `ReadWriteLock: an abandoned wait racing a release keeps nothing, ${TRIALS} trials`), LIMIT, async () => {
      let n = 0;
      await abandonRace({
        take: async (c, k) => {
          const hold = await new ReadWriteLock(c, k).write();
          return () => hold.release();
        },
        wait: async (c, k, signal) => {
          const rw = new ReadWriteLock(c, k);
          const hold = n++ % 4 < 2 ? await rw.read({ timeoutMs: 30_000, signal }) : await rw.write({ timeoutMs: 30_000, signal });
          return () => hold.release();
        },
        queued: async (k) => (await rwInfo(k))?.waiters === 1,
        settled: async (k) => (await rwInfo(k)) === null,
        reset: (k) => admin.call(['DEL', k]),
      });
    });

    test(name(FEATURE + ' ', `MultiLock: an abandoned wait racing a release keeps nothing, ${TRIALS} trials`), LIMIT, async () => {
      const names = (k: string) => [`{${k}}:a`, `{${k}}:b`];
      await abandonRace({
        take: async (c, k) => {
          const m = new MultiLock(c, names(k));
          assert.equal(await m.acquire(), true);
          return () => m.release();
        },
        wait: async (c, k, signal) => {
          const m = new MultiLock(c, [...names(k)].reverse());
          return (await m.acquire({ timeoutMs: 30_000, signal })) ? () => m.release() : null;
        },
        queued: async (k) => (await lockWaiters(names(k)[1])) === 1,
        settled: async (k) => Number(await admin.call(['EXISTS', ...names(k)])) === 0,
        reset: (k) => admin.call(['DEL', ...names(k)]),
      });
    });

    // -- elections -----------------------------------------------------------------

    test(name(FEATURE + ' ', 'Election: campaign, leader, resign, observe'), LIMIT, async () => {
      const k = key('election');
      const elected: bigint[] = [];
      const a = new Election(client, k, { onElected: (t) => elected.push(t) });
      const b = new Election(client, k);
      const observer = new Election(client, k).observe();
      await observer.start();
      assert.equal(await a.leader(), null);
      const term = await a.campaign();
      assert.deepEqual(elected, [term]);
      assert.equal(a.isLeader, true);
      assert.equal(a.term, term);
      assert.equal(await a.campaign(), term, 'a leader campaigning again keeps its term');
      assert.deepEqual(await b.leader(), { owner: a.owner, term });
      await assert.rejects(b.campaign({ timeoutMs: 100 }), LockTimeoutError);
      const campaigning = b.campaign({ timeoutMs: WAIT_MS });
      assert.ok(await until(async () => (await lockWaiters(k)) === 1));
      await a.resign();
      assert.equal(a.isLeader, false);
      assert.equal(a.term, undefined);
      const term2 = await campaigning;
      assert.ok(term2 > term);
      // Changes closer together than the observer's round trip may be seen as one: b leads until it has been seen.
      const changes: LeaderChange[] = [];
      for (let i = 0; i < 3; i++) changes.push((await observer.next())!);
      await b.resign();
      changes.push((await observer.next())!);
      observer.close();
      assert.equal(await observer.next(), null, 'closed');
      assert.deepEqual(
        changes.map((c) => [c.kind, c.leader?.owner, c.leader?.term]),
        [
          ['elected', a.owner, term],
          ['vacant', undefined, undefined],
          ['elected', b.owner, term2],
          ['vacant', undefined, undefined],
        ],
      );
      assert.equal(await a.leader(), null);
    });

    test(name(FEATURE + ' ', `Election: ${TAKEOVERS} forced takeovers, one leader per term, seen in order`), { timeout: 120_000 }, async () => {
      const k = key('takeover');
      const clients = await Promise.all([0, 1, 2].map(() => connectClient(flavour, server.port)));
      let revokedCalls = 0;
      const candidates = clients.map(({ client: c }) => new Election(c, k, { onRevoked: (e) => void (e instanceof LockLostError && revokedCalls++) }));
      let stop = false;
      // Elected candidates, in the order campaign() resolved.
      const elected: { e: Election; term: bigint; signal: AbortSignal }[] = [];
      const loops = candidates.map(async (e) => {
        while (!stop) {
          let term: bigint;
          try {
            term = await e.campaign({ timeoutMs: 1000 });
          } catch (err) {
            if (err instanceof LockTimeoutError) continue;
            throw err;
          }
          const signal = e.signal;
          elected.push({ e, term, signal });
          // Lead until revoked, then campaign again.
          await new Promise<void>((r) => {
            if (signal.aborted) return r();
            signal.addEventListener('abort', () => r(), { once: true });
            const poll = setInterval(() => stop && (clearInterval(poll), r()), 50);
            signal.addEventListener('abort', () => clearInterval(poll), { once: true });
          });
        }
      });
      const observed: LeaderChange[] = [];
      const observer = new Election(client, k).observe();
      const observing = (async () => {
        for await (const change of observer) observed.push(change);
      })();
      const terms: bigint[] = [];
      let revokedCount = 0;
      try {
        for (let i = 0; i < TAKEOVERS; i++) {
          assert.ok(await until(() => elected.length > i), `takeover ${i}: no one was elected`);
          const { e: leader, term, signal } = elected[i];
          assert.ok(terms.length === 0 || term > terms[terms.length - 1], `takeover ${i}: terms only grow (${term} after ${terms[terms.length - 1]})`);
          terms.push(term);
          if (i > 0) {
            const previous = elected[i - 1];
            assert.ok(await until(() => previous.signal.aborted, 2_000), `takeover ${i}: the old leader's signal did not abort`);
            assert.ok(previous.signal.reason instanceof LockLostError);
            revokedCount++;
          }
          assert.deepEqual(await leader.leader(), { owner: leader.owner, term }, 'the server agrees');
          assert.equal(
            candidates.filter((c) => c.isLeader).length,
            1,
            `takeover ${i}: one leader (${candidates.map((c) => c.isLeader)})`,
          );
          assert.ok(await until(() => observed.some((c) => c.kind === 'elected' && c.leader!.term === term), 5_000), `takeover ${i}: the observer missed term ${term}`);
          assert.equal(signal.aborted, false);
          if (i % 2) {
            assert.equal(Number(await admin.call(['LOCK.FORCERELEASE', k])), 1);
          } else {
            await admin.call(['CLIENT', 'KILL', 'ID', String(await tiedId((leader as unknown as { lock: object }).lock))]);
          }
        }
        assert.ok(await until(() => elected[TAKEOVERS - 1].signal.aborted, 2_000));
      } finally {
        stop = true;
        observer.close();
        await Promise.allSettled(loops);
        await observing.catch(() => {});
        for (const c of candidates) await c.resign().catch(() => {});
        for (const c of clients) c.close();
      }
      await Promise.all(loops); // no candidate failed with anything but a timeout
      assert.equal(revokedCount, TAKEOVERS - 1);
      assert.equal(revokedCalls, TAKEOVERS, 'onRevoked ran for every lost leadership');
      const electedTerms = observed.filter((c) => c.kind === 'elected').map((c) => c.leader!.term);
      assert.deepEqual(electedTerms.slice(0, TAKEOVERS), terms, 'the observer saw every leader, in order');
      const kinds = observed.map((c) => c.kind);
      assert.ok(kinds.every((c, i) => i === 0 || c !== kinds[i - 1]), 'elected and vacant alternate');
    });

    test(name('', 'Election.observe without notify-keyspace-events: EventsDisabledError at once'), LIMIT, async () => {
      const quiet = await Server.start(kind); // notify-keyspace-events ""
      const { client: c, close } = await connectClient(flavour, quiet.port);
      try {
        const k = key('quiet');
        const started = Date.now();
        await assert.rejects(new Election(c, k).observe().start(), (e: Error) => e instanceof EventsDisabledError && /notify-keyspace-events Kd/.test(e.message));
        await assert.rejects(
          (async () => {
            for await (const _ of new Election(c, k).observe()) void _;
          })(),
          EventsDisabledError,
        );
        assert.ok(Date.now() - started < 2_000, `said so at once (${Date.now() - started} ms)`);
        // Elections still work; only observing needs the events.
        const e = new Election(c, k);
        assert.ok((await e.campaign()) > 0n);
        await e.resign();
        assert.equal(await e.leader(), null);
      } finally {
        close();
        quiet.stop();
      }
    });
  }
}
