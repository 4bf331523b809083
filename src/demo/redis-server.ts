/**
 * Starts and stops a private `redis-server` on a free loopback port, for the demo and the
 * tests. Only the process started here is ever stopped (by its pid); nothing is flushed.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createServer, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** True when a `redis-server` binary is on PATH. */
export function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (typeof address === 'object' && address !== null) resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

/** A running private Redis. */
export interface PrivateRedis {
  readonly port: number;
  readonly url: string;
  readonly pid: number;
  /** Kills this server (SIGKILL) and waits for its exit. */
  kill(): Promise<void>;
  /** Starts a new server process on the same port (after `kill`). Empty: nothing persisted. */
  restart(): Promise<void>;
  /** Stops the server if it runs. */
  stop(): Promise<void>;
}

/** Starts `redis-server` on a free port with no persistence; resolves once it answers PING. */
export async function startRedisServer(extraArgs: string[] = []): Promise<PrivateRedis> {
  const port = await freePort();
  let child = await launch(port, extraArgs);
  const exited = (proc: ChildProcess) =>
    proc.exitCode !== null || proc.signalCode !== null
      ? Promise.resolve()
      : new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const self: PrivateRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child.pid ?? -1;
    },
    async kill() {
      const done = exited(child);
      child.ref(); // keep the event loop alive until the exit is seen
      child.kill('SIGKILL');
      await done;
    },
    async restart() {
      child = await launch(port, extraArgs);
    },
    async stop() {
      await self.kill();
    },
  };
  return self;
}

async function launch(port: number, extraArgs: string[]): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      ...extraArgs,
    ],
    { stdio: 'ignore' },
  );
  child.unref();
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
    if (await answersPing(port)) return child;
    await sleep(20);
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not answer on port ${port} within 10 s`);
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.setTimeout(500);
    const finish = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    // A server with a password answers -NOAUTH: it is up all the same.
    socket.once('data', (data) => finish(/^(\+PONG|-NOAUTH)/.test(data.toString())));
    socket.once('error', () => finish(false));
    socket.once('timeout', () => finish(false));
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
  });
}
