/**
 * The lock's signal aborts on every way a hold can end, connections are
 * reused, an aborted wait racing a release never keeps the lock, and a
 * server without the module says so. Registered per client library
 * (node-redis.test.ts, ioredis.test.ts) and per server.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { adapt, Lock, LockLostError, ModuleNotLoadedError, parseInfo, type Adapter } from '../src';
import { connectClient, type Flavour } from './clients';
import { Proxy } from './proxy';
import { KINDS, Server } from './servers';

const LIMIT = { timeout: 60_000 };
const FEATURE = '[module feature]';
/** Seen "at once": far below a check interval of the 30 s lease used there. */
const AT_ONCE_MS = 2_000;
const TRIALS = 100;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const key = (tag: string) => `lock:${tag}:${randomUUID().slice(0, 8)}`;

async function until(f: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await f()) return true;
    await sleep(5);
  }
  return f();
}

async function waiters(admin: Adapter, k: string): Promise<number> {
  return parseInfo(await admin.call(['LOCK.INFO', k]))?.waiters ?? 0;
}

async function connectionsReceived(admin: Adapter): Promise<number> {
  const text = String(await admin.call(['INFO', 'stats']));
  return Number(/total_connections_received:(\d+)/.exec(text)![1]);
}

/** Server-side ids of the connections the proxy made (link i ↔ the server's view of its local port). */
async function proxiedIds(admin: Adapter, proxy: Proxy, from = 0): Promise<string[]> {
  const list = String(await admin.call(['CLIENT', 'LIST']));
  const ports = new Set(proxy.links.slice(from).map((l) => `127.0.0.1:${l.server.localPort}`));
  return list
    .split('\n')
    .filter((line) => ports.has(/ addr=(\S+)/.exec(line)?.[1] ?? ''))
    .map((line) => /^id=(\d+)/.exec(line)![1]);
}

export function defineLifecycleSuite(flavour: Flavour) {
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
    const name = (what: string) => `${FEATURE} ${flavour} ${kind}: ${what}`;

    /** A held KEEPALIVE lock on a client behind a proxy; `end` ends its connection; the signal must abort at once. */
    async function abortsAtOnce(end: (proxy: Proxy) => Promise<void> | void, port = server.port) {
      const proxy = await Proxy.start(port);
      const { client: c, close } = await connectClient(flavour, proxy.port);
      try {
        const lock = new Lock(c, key('ends'), { leaseMs: 30_000 });
        assert.equal(await lock.acquire(), true);
        const signal = lock.signal;
        assert.equal(signal.aborted, false);
        const started = Date.now();
        await end(proxy);
        assert.ok(await until(() => signal.aborted, AT_ONCE_MS), 'the signal did not abort');
        assert.ok(Date.now() - started < AT_ONCE_MS);
        assert.ok(signal.reason instanceof LockLostError, String(signal.reason));
        assert.equal(lock.holds, 0);
      } finally {
        close();
        proxy.stop();
      }
    }

    test(name('the signal aborts at once when the server closes the connection (CLIENT KILL)'), LIMIT, () =>
      abortsAtOnce(async (proxy) => {
        // Link 0 is the user's client; the lock's connection came after it.
        for (const id of await proxiedIds(admin, proxy, 1)) await admin.call(['CLIENT', 'KILL', 'ID', id]);
      }),
    );

    test(name('the signal aborts at once when the connection is reset'), LIMIT, () => abortsAtOnce((proxy) => proxy.reset()));

    test(name('the signal aborts at once when the connection fails (protocol error)'), LIMIT, () => abortsAtOnce((proxy) => proxy.garbage()));

    test(name('the signal aborts at once when the server shuts down'), LIMIT, async () => {
      const own = await Server.start(kind);
      try {
        const { client: c, close } = await connectClient(flavour, own.port);
        try {
          await abortsAtOnce(() => {
            // No reply comes (the server exits); ioredis would resend it on reconnecting.
            void adapt(c).call(['SHUTDOWN', 'NOSAVE']).catch(() => {});
          }, own.port);
        } finally {
          close();
        }
      } finally {
        own.stop();
      }
    });

    for (const keepalive of [false, true]) {
      const mode = keepalive ? 'keepalive' : 'watchdog';
      test(name(`the signal aborts at the next check after FORCERELEASE (${mode})`), LIMIT, async () => {
        const k = key('force');
        const lock = new Lock(client, k, { keepalive, leaseMs: 600 });
        assert.equal(await lock.acquire(), true);
        await sleep(400);
        assert.equal(lock.signal.aborted, false, 'a healthy lock is not reported lost');
        assert.equal(Number(await admin.call(['LOCK.FORCERELEASE', k])), 1);
        assert.ok(await until(() => lock.signal.aborted, 2_000), 'FORCERELEASE not reported');
      });

      test(name(`the signal aborts when the lease lapses (${mode})`), LIMIT, async () => {
        const k = key('lapse');
        const lock = new Lock(client, k, { keepalive, leaseMs: 900 });
        assert.equal(await lock.acquire(), true);
        assert.equal(Number(await admin.call(['PEXPIRE', k, '1'])), 1);
        assert.ok(await until(() => lock.signal.aborted, 2_000), 'a lapsed lease not reported');
      });

      test(name(`acquisitions reuse the library's connections (${mode})`), LIMIT, async () => {
        const locks = [0, 1, 2, 3].map((i) => new Lock(client, key(`reuse${i}`), { keepalive }));
        for (const l of locks) {
          assert.equal(await l.acquire({ timeoutMs: 5_000 }), true);
          assert.equal(await l.release(), 0);
        }
        const before = await connectionsReceived(admin);
        for (let i = 0; i < 200; i++) {
          const l = locks[i % locks.length];
          assert.equal(await l.acquire({ timeoutMs: 5_000 }), true);
          assert.equal(await l.release(), 0);
        }
        assert.equal((await connectionsReceived(admin)) - before, 0, 'an acquisition opened a connection');
        // An aborted wait closes its connection (and with it its queue entry).
        const k = key('aborted');
        const holder = new Lock(client, k, { keepalive });
        assert.equal(await holder.acquire(), true);
        const waiter = new Lock(client, k, { keepalive });
        const controller = new AbortController();
        const waiting = waiter.acquire({ timeoutMs: 30_000, signal: controller.signal });
        assert.ok(await until(async () => (await waiters(admin, k)) === 1, 5_000));
        const blocked = String(await admin.call(['CLIENT', 'LIST'])).split('\n').filter((l) => / flags=\S*b/.test(l));
        assert.equal(blocked.length, 1);
        const id = /^id=(\d+)/.exec(blocked[0])![1];
        controller.abort();
        await assert.rejects(waiting);
        assert.ok(await until(async () => !String(await admin.call(['CLIENT', 'LIST'])).includes(`id=${id} `), 5_000), 'the aborted wait kept its connection');
        assert.equal(await holder.release(), 0);
      });

      test(name(`an aborted wait racing a release never keeps the lock, ${TRIALS} trials (${mode})`), LIMIT, async () => {
        // Holder and waiter on clients of their own, as two processes would be.
        const h = await connectClient(flavour, server.port);
        const w = await connectClient(flavour, server.port);
        let kept = 0;
        let granted = 0;
        try {
          for (let trial = 0; trial < TRIALS; trial++) {
            const k = key('race');
            const holder = new Lock(h.client, k, { keepalive });
            const waiter = new Lock(w.client, k, { keepalive });
            assert.equal(await holder.acquire(), true);
            const controller = new AbortController();
            const waiting = waiter.acquire({ timeoutMs: 30_000, signal: controller.signal }).catch(() => false);
            assert.ok(await until(async () => (await waiters(admin, k)) === 1, 5_000));
            // The same tick: the holder's release goes out and the waiter gives up, in turns in either order.
            let releasing: Promise<number>;
            if (trial % 2) {
              releasing = holder.release();
              controller.abort();
            } else {
              controller.abort();
              releasing = holder.release();
            }
            assert.equal(await releasing, 0);
            if (await waiting) {
              granted++; // the grant arrived first: held, and released normally
              assert.equal(await waiter.release(), 0);
              continue;
            }
            if (!(await until(async () => (await admin.call(['LOCK.INFO', k])) === null, 2_000))) {
              kept++;
              await admin.call(['LOCK.FORCERELEASE', k]);
            }
          }
        } finally {
          h.close();
          w.close();
        }
        assert.equal(kept, 0, `the aborted waiter kept the lock in ${kept} of ${TRIALS} trials (${granted} granted before the abort)`);
      });
    }

    test(name('a server without the module: ModuleNotLoadedError'), LIMIT, async () => {
      const bare = await Server.start(kind, [], { module: false });
      const { client: c, close } = await connectClient(flavour, bare.port);
      try {
        for (const keepalive of [false, true]) {
          await assert.rejects(new Lock(c, key('bare'), { keepalive }).acquire({ blocking: false }), (e: Error) => e instanceof ModuleNotLoadedError && e.message.includes('the hashlock module is not loaded'));
        }
        await assert.rejects(new Lock(c, key('bare')).info(), ModuleNotLoadedError);
      } finally {
        close();
        bare.stop();
      }
    });
  }
}
