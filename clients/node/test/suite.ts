/**
 * The Lock tests, registered once per client library (node-redis.test.ts,
 * ioredis.test.ts) and per server (Redis 7.0, Valkey 9.1). Tests whose name
 * starts with "[module feature]" use the module's KEEPALIVE, TOKEN or
 * REPLICAS (a name filter can select them).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { adapt, Lock, LockLostError, LockTimeoutError, NoReplicasError, NotLockError, NotOwnerError, parseInfo, WrongTypeError, type Adapter } from '../src';
import { connectClient, type Flavour } from './clients';
import { tryLock, unlock } from './redisson';
import { KINDS, Server } from './servers';

const WAIT_MS = 10_000;
const FEATURE = '[module feature]';
/** No test may hang the run. */
const LIMIT = { timeout: 60_000 };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(f: () => Promise<boolean> | boolean, ms = WAIT_MS): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await f()) return true;
    await sleep(10);
  }
  return f();
}

async function waiters(admin: Adapter, key: string): Promise<number> {
  return parseInfo(await admin.call(['LOCK.INFO', key]))?.waiters ?? 0;
}

const key = (tag: string) => `lock:${tag}:${randomUUID().slice(0, 8)}`;

export function defineSuite(flavour: Flavour) {
  for (const kind of KINDS) {
    let server: Server;
    let client: object;
    let admin: Adapter;
    let closeClient: () => void;
    before(async () => {
      server = await Server.start(kind);
      ({ client, close: closeClient } = await connectClient(flavour, server.port));
      admin = adapt(client);
    });
    after(() => {
      closeClient?.();
      server?.stop();
    });
    const modes = [
      { keepalive: false, label: 'watchdog', prefix: '' },
      { keepalive: true, label: 'keepalive', prefix: `${FEATURE} ` },
    ];
    const name = (prefix: string, what: string) => `${prefix}${flavour} ${kind}: ${what}`;

    for (const { keepalive, label, prefix } of modes) {
      test(name(prefix, `acquire, re-enter, release (${label})`), LIMIT, async () => {
        const k = key('basic');
        const lock = new Lock(client, k, { keepalive, leaseMs: 20_000 });
        assert.match(lock.owner, /^[0-9a-f-]{36}$/);
        assert.equal(await lock.acquire({ blocking: false }), true);
        assert.equal(await lock.acquire(), true);
        assert.equal(lock.holds, 2);
        const info = await lock.info();
        assert.equal(info?.owner, lock.owner);
        assert.equal(info?.holds, 2);
        assert.ok(info!.ttlMs > 0 && info!.ttlMs <= 20_000);
        const other = new Lock(client, k, { keepalive });
        assert.equal(await other.acquire({ blocking: false }), false);
        assert.equal(await other.acquire({ timeoutMs: 50 }), false);
        assert.equal(await lock.release(), 1);
        assert.equal(await lock.release(), 0);
        assert.equal(await lock.locked(), false);
        assert.equal(await lock.withLock(async () => lock.owned()), true);
        assert.equal(await lock.locked(), false);
        {
          await using held = await lock.hold();
          assert.equal(held.signal.aborted, false);
          assert.equal(await lock.owned(), true);
        }
        assert.equal(await lock.locked(), false);
      });

      test(name(prefix, `BLOCK hands the lock from one Lock to the next (${label})`), LIMIT, async () => {
        const k = key('handoff');
        const a = new Lock(client, k, { keepalive });
        const b = new Lock(client, k, { keepalive });
        assert.equal(await a.acquire(), true);
        const waiting = b.acquire({ timeoutMs: WAIT_MS });
        assert.ok(await until(async () => (await waiters(admin, k)) === 1));
        assert.equal(await a.release(), 0);
        assert.equal(await waiting, true);
        assert.equal((await b.info())?.owner, b.owner);
        assert.equal(await b.release(), 0);
      });

      test(name(prefix, `an aborted wait is never granted (${label})`), LIMIT, async () => {
        const k = key('abort');
        const a = new Lock(client, k, { keepalive });
        const b = new Lock(client, k, { keepalive });
        assert.equal(await a.acquire(), true);
        // Client-side timeout (700 ms) shorter than the server-side wait (30 s).
        const waiting = b.acquire({ timeoutMs: 30_000, signal: AbortSignal.timeout(700) });
        assert.ok(await until(async () => (await waiters(admin, k)) === 1), 'queued');
        await assert.rejects(waiting, (e: Error) => e.name === 'TimeoutError');
        assert.ok(await until(async () => (await waiters(admin, k)) === 0), 'left the queue');
        assert.equal(await a.release(), 0);
        await sleep(200);
        assert.equal(await admin.call(['LOCK.INFO', k]), null, 'nobody was granted the lock');
        assert.equal(await b.acquire({ blocking: false }), true, 'the Lock is usable again');
        assert.equal(await b.release(), 0);
      });

      test(name(prefix, `interop with a Redisson-protocol client (${label})`), LIMIT, async () => {
        const k = key('redisson');
        const redissonOwner = `${randomUUID()}:1`;
        assert.equal(await tryLock(admin, k, redissonOwner), null);
        const lock = new Lock(client, k, { keepalive });
        assert.equal(await lock.acquire({ blocking: false }), false);
        const waiting = lock.acquire({ timeoutMs: WAIT_MS });
        assert.ok(await until(async () => (await waiters(admin, k)) === 1));
        assert.equal(await unlock(admin, k, redissonOwner), 1, "Redisson's unlock script serves our waiter");
        assert.equal(await waiting, true);
        assert.ok((await tryLock(admin, k, redissonOwner))! > 0, 'Redisson sees it held');
        assert.equal(await lock.release(), 0);
        assert.equal(await tryLock(admin, k, redissonOwner), null);
        const same = new Lock(client, k, { keepalive: false, owner: redissonOwner });
        assert.equal(await same.acquire({ blocking: false }), true);
        assert.equal(same.holds, 2, "Redisson's owner id re-enters Redisson's lock");
        assert.equal(await unlock(admin, k, redissonOwner), 0);
        assert.equal(await same.release(), 0);
      });
    }

    test(name('', 'a timed-out wait resolves false and leaves the queue'), LIMIT, async () => {
      const k = key('timeout');
      const a = new Lock(client, k, { keepalive: false });
      const b = new Lock(client, k, { keepalive: false });
      assert.equal(await a.acquire(), true);
      const started = Date.now();
      assert.equal(await b.acquire({ timeoutMs: 300 }), false);
      assert.ok(Date.now() - started >= 290);
      assert.equal(await waiters(admin, k), 0);
      await assert.rejects(b.withLock(async () => 1, { timeoutMs: 50 }), LockTimeoutError);
      await a.release();
    });

    test(name('', "the user's client keeps answering while a Lock waits"), LIMIT, async () => {
      const k = key('isolated');
      const a = new Lock(client, k, { keepalive: false });
      const b = new Lock(client, k, { keepalive: false });
      assert.equal(await a.acquire(), true);
      const waiting = b.acquire({ timeoutMs: WAIT_MS });
      assert.ok(await until(async () => (await waiters(admin, k)) === 1));
      const started = Date.now();
      assert.equal(await admin.call(['PING']), 'PONG');
      assert.ok(Date.now() - started < 1000);
      await a.release();
      assert.equal(await waiting, true);
      await b.release();
    });

    test(name('', 'errors are typed; a lost lock aborts its signal'), LIMIT, async () => {
      const k = key('errors');
      const lock = new Lock(client, k, { keepalive: false });
      await assert.rejects(lock.release(), (e: Error) => e instanceof LockLostError && e instanceof NotOwnerError && e.message.startsWith('NOTOWNER'));
      await assert.rejects(lock.renew(), LockLostError);
      await admin.call(['SET', k, 'x']);
      await assert.rejects(lock.acquire({ blocking: false }), WrongTypeError);
      await assert.rejects(lock.info(), WrongTypeError);
      await admin.call(['DEL', k]);
      await admin.call(['HSET', k, 'a', '1', 'b', '1']);
      await assert.rejects(lock.acquire({ blocking: false }), NotLockError);
      await assert.rejects(lock.acquire({ timeoutMs: 1000 }), NotLockError);
      await admin.call(['DEL', k]);
      assert.throws(() => new Lock(client, k, { leaseMs: 0 }), RangeError);

      assert.equal(await lock.acquire(), true);
      const signal = lock.signal;
      assert.equal(Number(await admin.call(['LOCK.FORCERELEASE', k])), 1);
      await assert.rejects(lock.release(), LockLostError);
      assert.equal(signal.aborted, true);
      assert.ok(signal.reason instanceof LockLostError);
      assert.equal(lock.holds, 0);
    });

    test(name('', 'the watchdog renews the lease and notices a lost lock'), LIMIT, async () => {
      const k = key('watchdog');
      const lock = new Lock(client, k, { keepalive: false, leaseMs: 300 });
      assert.equal(await lock.acquire(), true);
      await sleep(1200); // four leases
      assert.equal((await lock.info())?.owner, lock.owner);
      await lock.renew();
      await admin.call(['LOCK.FORCERELEASE', k]);
      assert.ok(await until(() => lock.signal.aborted));
      await assert.rejects(lock.release(), LockLostError);
    });

    test(name('', 'LOCK.INFO in RESP3'), LIMIT, async () => {
      const { client: c3, close } = await connectClient(flavour, server.port, { resp: 3 });
      try {
        const lock = new Lock(c3, key('resp3'), { keepalive: false });
        assert.equal(await lock.acquire({ blocking: false }), true);
        const info = await lock.info();
        assert.deepEqual([info?.owner, info?.holds, info?.waiters], [lock.owner, 1, 0]);
        assert.equal(await lock.release(), 0);
      } finally {
        close();
      }
    });

    test(name(`${FEATURE} `, 'KEEPALIVE: a killed holder hands the lock on at once'), LIMIT, async () => {
      const k = key('killed');
      const holder = spawn(process.execPath, [path.join(__dirname, 'holder.js'), flavour, String(server.port), k], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      try {
        const line = await new Promise<string>((resolve) => {
          holder.stdout!.once('data', (d) => resolve(String(d)));
          holder.once('exit', (code) => resolve(`holder exited (${code})`));
        });
        assert.equal(line, 'held\n');
        const info = parseInfo(await admin.call(['LOCK.INFO', k]));
        assert.equal(info?.keepalive, true);
        const waiter = new Lock(client, k);
        const waiting = waiter.acquire({ timeoutMs: 25_000 });
        assert.ok(await until(async () => (await waiters(admin, k)) === 1));
        const killed = Date.now();
        holder.kill('SIGKILL');
        assert.equal(await waiting, true);
        const took = Date.now() - killed;
        assert.ok(took < 5000, `took ${took} ms; the lease was 30 s`);
        await waiter.release();
      } finally {
        holder.kill('SIGKILL');
      }
    });

    test(name(`${FEATURE} `, 'KEEPALIVE: the server renews the lease, no watchdog runs'), LIMIT, async () => {
      const lock = new Lock(client, key('tied'), { leaseMs: 300 });
      assert.equal(await lock.acquire(), true);
      assert.equal((await lock.info())?.keepalive, true);
      await sleep(1000);
      assert.equal(await lock.owned(), true);
      await lock.renew();
      assert.equal(await lock.release(), 0);
    });

    test(name(`${FEATURE} `, 'TOKEN: every acquisition issues a larger token'), LIMIT, async () => {
      const k = key('token');
      const a = new Lock(client, k, { token: true, keepalive: false });
      assert.equal(await a.acquire(), true);
      const first = a.token!;
      assert.equal(typeof first, 'bigint');
      assert.ok(first > 0n);
      assert.equal(await a.acquire(), true);
      assert.ok(a.token! > first);
      assert.equal((await a.info())?.token, a.token);
      const b = new Lock(client, k, { token: true });
      const waiting = b.acquire({ timeoutMs: WAIT_MS });
      assert.ok(await until(async () => (await waiters(admin, k)) === 1));
      await a.release();
      await a.release();
      assert.equal(await waiting, true);
      assert.ok(b.token! > a.token!);
      await b.release();
    });

    test(name(`${FEATURE} `, 'REPLICAS without replicas: NoReplicasError, nothing held'), LIMIT, async () => {
      const k = key('replicas');
      const lock = new Lock(client, k, { keepalive: false, replicas: { n: 1, timeoutMs: 200 } });
      await assert.rejects(lock.acquire({ blocking: false }), NoReplicasError);
      assert.equal(await admin.call(['LOCK.INFO', k]), null);
    });
  }
}
