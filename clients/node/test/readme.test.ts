/**
 * The README's examples, run as written against both servers (only the
 * port is changed and the helpers they call are supplied): TypeScript
 * compiles them here, as a user's build would (including `await using`).
 * The servers run with `notify-keyspace-events Kd`, as the repository's
 * redis.conf has it (the Election observer needs it).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import ts from 'typescript';

import { KINDS, Server } from './servers';

const readme = readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8');
const examples = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);

type Helpers = Record<string, (...args: never[]) => unknown>;

/** An example as an async function body taking its imports, its helpers and `console` as parameters. */
function compiled(example: string, port: number, helpers: Helpers): (require: NodeRequire, console: Pick<Console, 'log'>) => Promise<void> {
  const source = `export async function main(helpers: any) {\nconst { ${Object.keys(helpers).join(', ')} } = helpers;\n${example
    .replace(/^import .*$/gm, '')
    .replace('6380', String(port))}\n}`;
  const imports = example.match(/^import .*$/gm)!.join('\n');
  const js = ts.transpileModule(`${imports}\n${source}`, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'] },
  }).outputText;
  return async (req, console) => {
    const mod = { exports: {} as { main: (h: Helpers) => Promise<void> } };
    // The example imports 'hashlock': this package.
    const resolve = (id: string) => (id === 'hashlock' ? req(path.join(__dirname, '..', 'src')) : req(id));
    new Function('require', 'module', 'exports', 'console', js)(resolve, mod, mod.exports, console);
    await mod.exports.main(helpers);
  };
}

/** Runs an example; its node-redis client is closed afterwards. */
async function run(example: string, port: number, helpers: Helpers, console: Pick<Console, 'log'> = globalThis.console) {
  let client: { destroy(): void } | undefined;
  try {
    await compiled(example, port, helpers)(
      ((id: string) => {
        const m = require(id);
        if (id !== 'redis') return m;
        // Keep hold of the example's client to close it afterwards.
        return { ...m, createClient: (o: object) => (client = m.createClient(o)) };
      }) as NodeRequire,
      console,
    );
  } finally {
    client?.destroy();
  }
}

test('the README has both examples', () => {
  assert.equal(examples.length, 2);
});

for (const kind of KINDS) {
  let server: Server;
  before(async () => {
    server = await Server.start(kind, ['--notify-keyspace-events', 'Kd']);
  });
  after(() => server?.stop());

  // The example uses the default, keepalive: true.
  test(`[module feature] README example runs as written (${kind})`, { timeout: 30_000 }, async () => {
    const shipped: number[] = [];
    await run(examples[0], server.port, {
      shipOrder: async (n: number, o: { signal: AbortSignal }) => {
        assert.ok(o.signal instanceof AbortSignal);
        shipped.push(n);
      },
    });
    assert.deepEqual(shipped, [42, 43]);
  });

  test(`[module feature] README family example runs as written (${kind})`, { timeout: 30_000 }, async () => {
    const calls: string[] = [];
    const logged: unknown[] = [];
    const helper = (what: string) => async (...args: unknown[]) => {
      calls.push(what);
      if (what === 'callApi') assert.equal((args[0] as { signal: AbortSignal }).signal.aborted, false);
      if (what === 'transfer') assert.deepEqual(args, [1, 2]);
    };
    await run(
      examples[1],
      server.port,
      { callApi: helper('callApi'), updateCatalog: helper('updateCatalog'), readCatalog: helper('readCatalog'), transfer: helper('transfer') },
      { log: (...args: unknown[]) => void logged.push(...args) },
    );
    assert.deepEqual(calls, ['callApi', 'updateCatalog', 'readCatalog', 'transfer']);
    const [elected, vacant] = logged as [{ kind: string; leader: { owner: string; term: bigint } }, string];
    assert.equal(elected.kind, 'elected');
    assert.equal(typeof elected.leader.term, 'bigint');
    assert.equal(vacant, 'vacant');
    assert.equal(logged.length, 2);
  });
}
