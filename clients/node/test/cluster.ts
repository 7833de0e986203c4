/**
 * Lock on node-redis's createCluster and ioredis's Cluster: routed by key,
 * waits on the key's node, and the library's connections follow ASK and
 * MOVED (a wait whose slot moves is re-issued on the new node; a KEEPALIVE
 * lock whose slot moves is tied again there). Two real primaries per
 * server kind: `src` starts with every slot, a test moves its own key's
 * slot to `dst`.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { createCluster } from 'redis';
import IORedis from 'ioredis';

import { adapt, Lock, parseInfo, type Adapter } from '../src';
import { connectClient, type Flavour } from './clients';
import { KINDS, Server, type Kind } from './servers';

const LIMIT = { timeout: 60_000 };
const CLUSTER = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-require-full-coverage', 'no'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(f: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await f()) return true;
    await sleep(20);
  }
  return f();
}

class TwoNodes {
  private constructor(
    readonly src: Server,
    readonly dst: Server,
    readonly s: Adapter,
    readonly d: Adapter,
    private readonly closers: (() => void)[],
    readonly srcId: string,
    readonly dstId: string,
  ) {}

  static async start(kind: Kind): Promise<TwoNodes> {
    const [src, dst] = await Promise.all([Server.start(kind, CLUSTER), Server.start(kind, CLUSTER)]);
    // Plain (non-cluster) connections to each node, for the test's own commands.
    const a = await connectClient('node-redis', src.port);
    const b = await connectClient('node-redis', dst.port);
    const s = adapt(a.client);
    const d = adapt(b.client);
    await s.call(['CLUSTER', 'ADDSLOTSRANGE', '0', '16383']);
    await s.call(['CLUSTER', 'MEET', '127.0.0.1', String(dst.port)]);
    const ok = async (c: Adapter) => String(await c.call(['CLUSTER', 'INFO'])).includes('cluster_state:ok');
    const two = async () => String(await d.call(['CLUSTER', 'NODES'])).trim().split('\n').length === 2;
    assert.ok(await until(async () => (await ok(s)) && (await ok(d)) && (await two()), 20_000), 'cluster did not form');
    const srcId = String(await s.call(['CLUSTER', 'MYID']));
    const dstId = String(await d.call(['CLUSTER', 'MYID']));
    return new TwoNodes(src, dst, s, d, [a.close, b.close], srcId, dstId);
  }

  async slot(key: string): Promise<string> {
    return String(await this.s.call(['CLUSTER', 'KEYSLOT', key]));
  }

  async startMigration(key: string) {
    const slot = await this.slot(key);
    await this.d.call(['CLUSTER', 'SETSLOT', slot, 'IMPORTING', this.srcId]);
    await this.s.call(['CLUSTER', 'SETSLOT', slot, 'MIGRATING', this.dstId]);
  }

  async finishMigration(key: string) {
    const slot = await this.slot(key);
    await this.d.call(['CLUSTER', 'SETSLOT', slot, 'NODE', this.dstId]);
    await this.s.call(['CLUSTER', 'SETSLOT', slot, 'NODE', this.dstId]);
  }

  /** Moves `key` (the lock with it, if held) and its slot to dst. */
  async move(key: string) {
    await this.startMigration(key);
    await this.s.call(['MIGRATE', '127.0.0.1', String(this.dst.port), '', '0', '5000', 'KEYS', key]);
    await this.finishMigration(key);
  }

  stop() {
    for (const c of this.closers) c();
    this.src.stop();
    this.dst.stop();
  }
}

/** The user's cluster client of each library, connected through `port`. */
async function clusterClient(flavour: Flavour, port: number): Promise<{ client: object; close: () => void }> {
  if (flavour === 'node-redis') {
    const c = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${port}` }], RESP: 2 });
    c.on('error', () => {});
    await c.connect();
    return { client: c, close: () => c.destroy() };
  }
  const c = new IORedis.Cluster([{ host: '127.0.0.1', port }], { lazyConnect: true });
  c.on('error', () => {});
  await c.connect();
  return { client: c, close: () => c.disconnect() };
}

const info = async (node: Adapter, key: string) => parseInfo(await node.call(['LOCK.INFO', key]));

export function defineClusterSuite(flavour: Flavour) {
  for (const kind of KINDS) {
    let nodes: TwoNodes;
    before(async () => {
      nodes = await TwoNodes.start(kind);
    });
    after(() => nodes?.stop());
    const name = (what: string) => `${flavour} ${kind} cluster: ${what}`;
    const key = (tag: string) => `lock:${tag}:${randomUUID().slice(0, 8)}`;

    for (const keepalive of [false, true]) {
      const mode = keepalive ? 'keepalive' : 'watchdog';
      test(name(`acquire, re-enter, hand off through the cluster client (${mode})`), LIMIT, async () => {
        const { client, close } = await clusterClient(flavour, nodes.src.port);
        try {
          const k = key('basic');
          const a = new Lock(client, k, { keepalive });
          const b = new Lock(client, k, { keepalive });
          assert.equal(await a.acquire(), true);
          assert.equal(await a.acquire({ blocking: false }), true);
          assert.equal((await a.info())?.holds, 2);
          const waiting = b.acquire({ timeoutMs: 10_000 });
          assert.ok(await until(async () => (await info(nodes.s, k))?.waiters === 1, 10_000));
          assert.equal(await a.release(), 1);
          assert.equal(await a.release(), 0);
          assert.equal(await waiting, true);
          assert.equal((await b.info())?.owner, b.owner);
          assert.equal(await b.release(), 0);
        } finally {
          close();
        }
      });
    }

    test(name('a wait follows ASK (slot migrating) and MOVED (slot moved)'), LIMIT, async () => {
      const { client, close } = await clusterClient(flavour, nodes.src.port);
      try {
        // The client still maps the keys to src; the library's connection follows the server.
        const asked = new Lock(client, key('ask'), { keepalive: false });
        await nodes.startMigration(asked.name);
        assert.equal(await asked.acquire({ timeoutMs: 10_000 }), true); // src: ASK -> dst with ASKING
        // While the slot migrates, a plain call on either node is redirected: count the keys instead.
        const slot = await nodes.slot(asked.name);
        assert.equal(Number(await nodes.d.call(['CLUSTER', 'COUNTKEYSINSLOT', slot])), 1);
        assert.equal(Number(await nodes.s.call(['CLUSTER', 'COUNTKEYSINSLOT', slot])), 0);
        await nodes.finishMigration(asked.name);
        assert.equal((await info(nodes.d, asked.name))?.owner, asked.owner);
        assert.equal(await asked.release(), 0);

        const moved = new Lock(client, key('moved'), { keepalive: true });
        await nodes.move(moved.name);
        assert.equal(await moved.acquire({ timeoutMs: 10_000 }), true); // src: MOVED -> dst
        assert.equal((await info(nodes.d, moved.name))?.owner, moved.owner);
        assert.equal((await info(nodes.d, moved.name))?.keepalive, true);
        assert.equal(await moved.release(), 0);
      } finally {
        close();
      }
    });

    test(name('[module feature] a queued wait follows its slot to the new node'), LIMIT, async () => {
      const { client, close } = await clusterClient(flavour, nodes.src.port);
      try {
        const k = key('follow');
        const holder = new Lock(client, k, { keepalive: false });
        const waiter = new Lock(client, k, { keepalive: false });
        assert.equal(await holder.acquire(), true);
        const waiting = waiter.acquire({ timeoutMs: 20_000 });
        assert.ok(await until(async () => (await info(nodes.s, k))?.waiters === 1, 10_000));
        await nodes.move(k);
        assert.ok(await until(async () => (await info(nodes.d, k))?.waiters === 1, 5_000), 'the wait was not re-issued on the new node');
        assert.equal(await holder.release(), 0);
        assert.equal(await waiting, true);
        assert.equal((await info(nodes.d, k))?.owner, waiter.owner);
        assert.equal(await waiter.release(), 0);
      } finally {
        close();
      }
    });

    test(name('[module feature] a KEEPALIVE lock whose slot moves is tied again on the new node'), LIMIT, async () => {
      const { client, close } = await clusterClient(flavour, nodes.src.port);
      try {
        const k = key('retie');
        const holder = new Lock(client, k, { leaseMs: 900 });
        assert.equal(await holder.acquire(), true);
        await nodes.move(k);
        await sleep(2_000); // over two leases
        const there = await info(nodes.d, k);
        assert.equal(there?.owner, holder.owner, 'the lock lapsed on the new node');
        assert.equal(there?.keepalive, true, 'not tied again on the new node');
        assert.equal(holder.signal.aborted, false);
        assert.equal(await holder.release(), 0);
        assert.equal(await info(nodes.d, k), null);
      } finally {
        close();
      }
    });
  }
}
