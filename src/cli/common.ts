/**
 * What the `sluice` commands share: exit statuses, the error a command ends with, the Redis
 * connection (`--url`, `REDIS_URL`), the policy file, and text formatting.
 */
import { type PolicyConfig, PolicyFileError, policyConfigFrom } from '../config/index.js';
import { parsePolicyText } from '../config/load.js';
import { shown } from '../config/problems.js';
import type { InvalidInputError } from '../errors.js';
import { connectRedis } from '../redis/node-redis/connect.js';
import type { RedisConnection } from '../redis/node-redis/connection.js';
import { CliError, DEFAULT_URL, EXIT, readJsonText, usage } from './exit.js';
import { commandFailure, connectFailure } from './failures.js';
import { escapeControls } from './output.js';

export { CliError, DEFAULT_URL, EXIT, NAMESPACE, readJsonText, usage } from './exit.js';
export { redacted } from './failures.js';

/** The options every Redis command takes. */
export interface RedisOptions {
  readonly url?: string;
  readonly namespace: string;
  readonly json?: boolean;
}

/** The usage error of a `--namespace` the limiter does not take, quoting it. */
export function badNamespace(namespace: string): CliError {
  return usage(
    `--namespace must be 1–64 characters of [A-Za-z0-9._:-]; received ${shown(namespace)}`,
  );
}

/** `--url`, else `REDIS_URL`, else the default. */
export function redisUrl(options: { url?: string }): string {
  return options.url ?? process.env.REDIS_URL ?? DEFAULT_URL;
}

export type Client = RedisConnection;

/**
 * Connects to Redis once, without reconnecting. An unreachable Redis, one that refuses the
 * setup (a password, a database, TLS) or a bad URL is a setup error (exit 2) with a one-line
 * message, never a stack trace.
 */
export async function connect(url: string): Promise<Client> {
  try {
    return await connectRedis({
      url,
      reconnect: false,
      connectTimeoutMs: 2000,
      stallTimeoutMs: 0,
      onError: () => {},
    });
  } catch (error) {
    throw connectFailure(error, url);
  }
}

/** Closes a client, whatever state it is in. */
export async function disconnect(client: Client): Promise<void> {
  try {
    await client.close();
  } catch {
    client.destroy(); // idempotent: also mid-recycle, whatever isOpen says
  }
}

/**
 * Maps a failure of a Redis command to a setup error (exit 2): a refusal (`NOAUTH`,
 * `WRONGPASS`, `NOPERM`…) in words, a timeout, a lost connection, another error reply.
 */
export function redisFailure(error: unknown, url: string): never {
  throw commandFailure(error, url);
}

/**
 * Reads the policy file: unreadable → exit 2; not JSON, a key twice in one object, or
 * invalid → exit 1 with every problem.
 */
export async function readConfig(file: string): Promise<PolicyConfig> {
  const text = await readJsonText(file);
  try {
    return policyConfigFrom(parsePolicyText(text));
  } catch (error) {
    if (error instanceof PolicyFileError) {
      const n = error.issues.length;
      throw new CliError(
        `${file} is not a valid policy file (${n} problem${n === 1 ? '' : 's'}; sluice check-config ${file} lists them)`,
        EXIT.failed,
        error.issues.map((issue) => `  ${issue.message}`),
        { errors: error.issues.map(issueJson) },
      );
    }
    throw error;
  }
}

/** One problem of a policy file, as JSON. */
export function issueJson(issue: InvalidInputError) {
  return {
    field: issue.field,
    expected: issue.expected,
    received: issue.received,
    message: issue.message,
  };
}

/** A duration in words, rounded: `850 ms`, `4.25 s`, `41.2 s`, `12 min 3 s`, `2 h 5 min`. */
export function duration(ms: number): string {
  if (!Number.isFinite(ms)) return 'never';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${Number((ms / 1000).toFixed(2))} s`;
  if (ms < 120_000) return `${Number((ms / 1000).toFixed(1))} s`;
  const s = Math.round(ms / 1000);
  if (s < 7200) return `${Math.floor(s / 60)} min${s % 60 === 0 ? '' : ` ${s % 60} s`}`;
  const m = Math.round(s / 60);
  return `${Math.floor(m / 60)} h${m % 60 === 0 ? '' : ` ${m % 60} min`}`;
}

/** `1,234,567`. */
export const count = (n: number) => n.toLocaleString('en-US');

/**
 * Rows as aligned columns (numbers right-aligned, with thousands separators), two spaces
 * apart; each cell as it is printed (control characters escaped), so that they stay aligned.
 */
export function table(rows: readonly (readonly (string | number)[])[]): string[] {
  const cells = rows.map((row) =>
    row.map((cell) => (typeof cell === 'number' ? count(cell) : escapeControls(cell))),
  );
  const widths: number[] = [];
  for (const row of cells) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return cells.map((row, r) =>
    row
      .map((cell, i) =>
        typeof rows[r]?.[i] === 'number'
          ? cell.padStart(widths[i] ?? 0)
          : cell.padEnd(widths[i] ?? 0),
      )
      .join('  ')
      .trimEnd(),
  );
}
