/**
 * Exit statuses, the error a command ends with, and reading a JSON file: kept free of heavy
 * imports, so that `sluice --help`, `--version`, usage errors and unreadable files answer
 * without loading the Redis client.
 */
import { readFile } from 'node:fs/promises';

/** Exit statuses: 0 ok, 1 a check failed or the input is invalid, 2 usage or setup. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** Redis when neither `--url` nor `REDIS_URL` is given. */
export const DEFAULT_URL = 'redis://127.0.0.1:6379';

/** A namespace as the limiter takes it. */
export const NAMESPACE = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * Ends a command with `exitCode` and a message for stderr (and, with `--json`, an answer
 * `{ ok: false, error, … }` on stdout). `details` are more lines for stderr.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    readonly details: readonly string[] = [],
    readonly json: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** A usage error (exit 2). */
export const usage = (message: string) => new CliError(message, EXIT.usage);

/**
 * A JSON file's text, once it parses: unreadable → exit 2; not JSON → exit 1. What it
 * means is for the library to say (a policy file: `parsePolicyText`, then its checks).
 */
export async function readJsonText(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`, EXIT.usage);
  }
  try {
    JSON.parse(text);
    return text;
  } catch (error) {
    throw new CliError(`${file} is not JSON: ${(error as Error).message}`, EXIT.failed, [], {
      file,
      valid: false,
    });
  }
}
