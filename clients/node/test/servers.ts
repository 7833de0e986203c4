/**
 * Real Redis / Valkey servers for the tests: a free loopback port, a temp
 * dir, the module loaded; killed by stop(). Binaries: redis-server on PATH
 * (or $REDIS_SERVER) and $VALKEY_SERVER; the module: $HASHLOCK_MODULE.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const KINDS = ['redis', 'valkey'] as const;
export type Kind = (typeof KINDS)[number];

function binary(kind: Kind): string {
  const p = kind === 'redis' ? (process.env.REDIS_SERVER ?? 'redis-server') : process.env.VALKEY_SERVER;
  if (!p || (p.includes('/') && !existsSync(p))) throw new Error(`${kind} server binary not found (${p}); set ${kind === 'redis' ? 'REDIS_SERVER' : 'VALKEY_SERVER'}`);
  return p;
}

function modulePath(): string {
  const p = process.env.HASHLOCK_MODULE;
  if (!p || !existsSync(p)) throw new Error(`HASHLOCK_MODULE=${p} is not a file: run cargo build --release and set it (make test-clients does)`);
  return p;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.setTimeout(1000);
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      resolve(d.toString().startsWith('+PONG'));
      sock.destroy();
    });
    sock.on('error', () => resolve(false));
    sock.on('timeout', () => {
      resolve(false);
      sock.destroy();
    });
  });
}

export class Server {
  private constructor(
    readonly kind: Kind,
    readonly port: number,
    private readonly proc: ChildProcess,
    private readonly dir: string,
  ) {}

  /** `extra`: more server arguments (e.g. cluster mode); `module: false` starts it without the module. */
  static async start(kind: Kind, extra: string[] = [], options: { module?: boolean } = {}): Promise<Server> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const port = await freePort();
      const dir = mkdtempSync(path.join(os.tmpdir(), `hashlock-node-${kind}-`));
      const proc = spawn(
        binary(kind),
        ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no',
          '--logfile', 'server.log', '--enable-module-command', 'local', '--enable-debug-command', 'local',
          ...(options.module === false ? [] : ['--loadmodule', modulePath()]), ...extra],
        { cwd: dir, stdio: 'ignore' },
      );
      let exited = false;
      proc.on('exit', () => (exited = true));
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && !exited) {
        if (await ping(port)) {
          // Even if the run dies before stop(): no server outlives it.
          process.once('exit', () => proc.kill('SIGKILL'));
          return new Server(kind, port, proc, dir);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
    throw new Error(`${kind} server did not start`);
  }

  /** Kills the server process (what a crash or a lost host looks like to clients). */
  kill(): void {
    this.proc.kill('SIGKILL');
  }

  stop(): void {
    this.proc.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
