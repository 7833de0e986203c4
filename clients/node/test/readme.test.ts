/**
 * The README's example, run as written against both servers (only the port
 * is changed and shipOrder is supplied): TypeScript compiles it here, as a
 * user's build would (including `await using`).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import ts from 'typescript';

import { KINDS, Server } from './servers';

const readme = readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8');
const example = /```ts\n([\s\S]*?)```/.exec(readme)![1];

/** The example as an async function body taking its imports as parameters. */
function compiled(port: number): (require: NodeRequire, shipOrder: (n: number, o: object) => Promise<void>) => Promise<void> {
  const source = `export async function main(shipOrder: any) {\n${example
    .replace(/^import .*$/gm, '')
    .replace('6380', String(port))}\n}`;
  const imports = example.match(/^import .*$/gm)!.join('\n');
  const js = ts.transpileModule(`${imports}\n${source}`, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'] },
  }).outputText;
  return async (req, shipOrder) => {
    const mod = { exports: {} as { main: (s: unknown) => Promise<void> } };
    // The example imports 'hashlock': this package.
    const resolve = (id: string) => (id === 'hashlock' ? req(path.join(__dirname, '..', 'src')) : req(id));
    new Function('require', 'module', 'exports', js)(resolve, mod, mod.exports);
    await mod.exports.main(shipOrder);
  };
}

for (const kind of KINDS) {
  let server: Server;
  before(async () => {
    server = await Server.start(kind);
  });
  after(() => server?.stop());

  // The example uses the default, keepalive: true.
  test(`[module feature] README example runs as written (${kind})`, { timeout: 30_000 }, async () => {
    const shipped: number[] = [];
    let client: { destroy(): void } | undefined;
    await compiled(server.port)(
      ((id: string) => {
        const m = require(id);
        if (id !== 'redis') return m;
        // Keep hold of the example's client to close it afterwards.
        return { ...m, createClient: (o: object) => (client = m.createClient(o)) };
      }) as NodeRequire,
      async (n, o) => {
        assert.ok((o as { signal: AbortSignal }).signal instanceof AbortSignal);
        shipped.push(n);
      },
    );
    client?.destroy();
    assert.deepEqual(shipped, [42, 43]);
  });
}
