/**
 * `sluice serve` processes for the tests, and a real gRPC client of them: each server is the
 * built CLI (`dist/cli/main.js serve`) in its own process, on free loopback ports, stopped by
 * pid after the file (even when a test fails); the client is `@grpc/grpc-js` in the test's
 * process, with the service's own `.proto` files.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const PROTO = join(ROOT, 'src', 'serve', 'proto');

export interface ServeProcess {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly child: ChildProcess;
  /** Everything it wrote on stderr so far. */
  stderr(): string;
  /** Waits for a line of stderr matching `pattern` (from the start), at most `ms`. */
  waitFor(pattern: RegExp, ms?: number): Promise<void>;
  /** Sends SIGTERM; resolves the exit code. */
  stop(): Promise<number | null>;
}

const started: ServeProcess[] = [];
const dirs: string[] = [];
const clients: grpc.Client[] = [];
after(async () => {
  for (const c of clients) c.close();
  for (const p of started) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A temporary directory, removed after the file; with `files` written in it. */
export function configDir(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-serve-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

/**
 * Starts `sluice serve --config <config> --redis-url <redisUrl>` with `args` and `env`
 * (`redisUrl` `''`: no `--redis-url`, Redis from `env`).
 */
export async function startServe(
  config: string,
  redisUrl: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
): Promise<ServeProcess> {
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--config', config, '--host', '127.0.0.1']
      .concat(redisUrl === '' ? [] : ['--redis-url', redisUrl])
      .concat(['--grpc-port', '0', '--http-port', '0'])
      // A shared test machine is slow at times: a deadline of 1 s unless a test sets one.
      .concat(args.includes('--timeout-ms') ? [] : ['--timeout-ms', '1000'])
      .concat(args),
    { env: { ...process.env, REDIS_URL: '', ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let text = '';
  const waiters = new Set<() => void>();
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
    for (const w of waiters) w();
  });
  const waitFor = (pattern: RegExp, ms = 30_000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (pattern.test(text)) {
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        } else if (child.exitCode !== null) {
          waiters.delete(check);
          clearTimeout(timer);
          reject(new Error(`sluice serve exited (${child.exitCode}): ${text}`));
        }
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no ${pattern} within ${ms} ms: ${text}`));
      }, ms);
      waiters.add(check);
      child.once('exit', check);
      check();
    });
  const base = { child, stderr: () => text, waitFor };
  const stop = () =>
    new Promise<number | null>((resolve) => {
      if (child.exitCode !== null) resolve(child.exitCode);
      else {
        child.once('exit', (code) => resolve(code));
        child.kill('SIGTERM');
      }
    });
  const placeholder = { ...base, grpcPort: 0, httpPort: 0, stop };
  started.push(placeholder);
  await waitFor(/gRPC on port \d+, HTTP on port \d+/);
  const [, grpcPort, httpPort] = /gRPC on port (\d+), HTTP on port (\d+)/.exec(text) as string[];
  const process_ = { ...base, grpcPort: Number(grpcPort), httpPort: Number(httpPort), stop };
  started[started.indexOf(placeholder)] = process_;
  return process_;
}

const definition = protoLoader.loadSync(
  ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'],
  {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [PROTO],
  },
);
const loaded = grpc.loadPackageDefinition(definition) as unknown as {
  envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
};

/** One descriptor of a request, as the test writes it. */
export interface TestDescriptor {
  entries: { key: string; value?: string }[];
  limit?: { requests_per_unit: number; unit: string };
  hits_addend?: { value: number };
  is_negative_hits?: boolean;
}

export interface TestRequest {
  domain: string;
  descriptors: TestDescriptor[];
  hits_addend?: number;
}

export interface TestStatus {
  code: string;
  current_limit: { requests_per_unit: number; unit: string; name: string } | null;
  limit_remaining: number;
  duration_until_reset: { seconds: string; nanos: number } | null;
}

export interface TestResponse {
  overall_code: string;
  statuses: TestStatus[];
  response_headers_to_add: { key: string; value: string }[];
  dynamic_metadata: { fields: Record<string, unknown> } | null;
}

/** A gRPC client of one server; closed after the file. */
export function rlsClient(port: number) {
  const client = new loaded.envoy.service.ratelimit.v3.RateLimitService(
    `127.0.0.1:${port}`,
    grpc.credentials.createInsecure(),
  );
  const health = new loaded.grpc.health.v1.Health(
    `127.0.0.1:${port}`,
    grpc.credentials.createInsecure(),
  );
  clients.push(client, health);
  const unary = <T>(c: grpc.Client, method: string, request: unknown, deadlineMs: number) =>
    new Promise<T>((resolve, reject) => {
      (c as unknown as Record<string, (...a: unknown[]) => void>)[method]?.(
        request,
        { deadline: Date.now() + deadlineMs },
        (error: grpc.ServiceError | null, response: T) =>
          error ? reject(error) : resolve(response),
      );
    });
  return {
    should: (request: TestRequest, deadlineMs = 5000) =>
      unary<TestResponse>(client, 'ShouldRateLimit', request, deadlineMs),
    check: (service = 'ratelimit') => unary<{ status: string }>(health, 'Check', { service }, 5000),
    /** A `Watch` of the health service: every status it sends, until the server ends it. */
    watch(service = 'ratelimit') {
      const statuses: string[] = [];
      const methods = health as unknown as Record<
        string,
        (r: unknown) => grpc.ClientReadableStream<{ status: string }>
      >;
      const stream = methods.Watch?.({ service });
      const ended = new Promise<string[]>((resolve, reject) => {
        stream?.on('data', (m: { status: string }) => statuses.push(m.status));
        stream?.on('end', () => resolve(statuses));
        stream?.on('error', reject);
      });
      return { statuses, ended };
    },
  };
}

/** A request of one domain whose descriptors are `key=value` lists. */
export function request(domain: string, ...descriptors: string[][]): TestRequest {
  return {
    domain,
    descriptors: descriptors.map((pairs) => ({
      entries: pairs.map((pair) => {
        const [key, value] = pair.split('=') as [string, string | undefined];
        return { key, value: value ?? '' };
      }),
    })),
  };
}

/** `GET`/`POST` on a server's HTTP port: the status and the body text. */
export async function http(port: number, path: string, body?: unknown) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, text: await response.text() };
}

export { grpc };
