/**
 * Validation of `createRedisClient`'s options (zod), before anything connects: a bad option
 * is an `InvalidInputError` naming `options.<field>`, and no socket is ever opened for it.
 */
import { z } from 'zod';
import { InvalidInputError } from '../errors.js';
import { MAX_TIMER_MS } from '../validate.js';

const callback = z.custom<(...args: never[]) => unknown>(
  (value) => typeof value === 'function',
  'a function',
);
/** Milliseconds: an integer from `min` to the longest timer Node.js honours. */
const ms = (min: number) => {
  const expected = `an integer from ${min} to ${MAX_TIMER_MS}`;
  return z.number(expected).int(expected).min(min, expected).max(MAX_TIMER_MS, expected);
};

/** PEM text or bytes, or a list of them (Node's `tls.connect` options). */
const pem = z.union(
  [z.string(), z.instanceof(Buffer), z.array(z.union([z.string(), z.instanceof(Buffer)]))],
  'PEM text, a Buffer, or an array of them',
);

const schema = z.strictObject({
  username: z.string('a string (an ACL user name)').min(1, 'a non-empty string').optional(),
  password: z.string('a string').min(1, 'a non-empty string').optional(),
  database: z
    .number('an integer from 0 (a database index)')
    .int('an integer from 0')
    .min(0, 'an integer from 0')
    .optional(),
  tls: z
    .union(
      [
        z.boolean(),
        z.strictObject({
          ca: pem.optional(),
          cert: pem.optional(),
          key: pem.optional(),
          servername: z.string('a host name').min(1, 'a host name').optional(),
          rejectUnauthorized: z.boolean('true or false').optional(),
        }),
      ],
      'true, or { ca, cert, key, servername, rejectUnauthorized }',
    )
    .optional(),
  url: z
    .string('a redis:// or rediss:// URL')
    .refine(
      (url) =>
        /^rediss?:\/\//.test(url) && URL.canParse(url) && /^\/?\d*$/.test(new URL(url).pathname),
      'a redis:// or rediss:// URL, with at most a database number as its path (/0)',
    )
    .optional(),
  connectTimeoutMs: ms(1).optional(),
  reconnect: z.boolean('true or false').optional(),
  onError: callback.optional(),
  onReconnect: callback.optional(),
  commandTimeoutMs: ms(0).optional(),
  // Below 100 ms an answer merely delayed by a busy pipeline would read as a stall.
  stallTimeoutMs: ms(0)
    .refine((v) => v === 0 || v >= 100, `0 (off) or an integer from 100 to ${MAX_TIMER_MS}`)
    .optional(),
  onStall: callback.optional(),
  fastPath: z.boolean('true or false').optional(),
  metrics: z
    .custom<object>(
      (value) =>
        typeof value === 'object' &&
        value !== null &&
        typeof (value as { redisEvent?: unknown }).redisEvent === 'function',
      'a Metrics (with redisEvent)',
    )
    .optional(),
});

/** The options, checked; `undefined` is `{}`. */
export function checkClientOptions<T extends object>(options: T | undefined): T {
  if (options === undefined) return {} as T;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidInputError('options', 'an object of createRedisClient options', options);
  }
  const parsed = schema.safeParse(options);
  if (parsed.success) return options;
  const issue = parsed.error.issues[0];
  const path = (issue?.path ?? []).map(String);
  if (issue?.code === 'unrecognized_keys' && issue.keys[0] !== undefined) path.push(issue.keys[0]);
  const field = ['options', ...path].join('.');
  const expected =
    issue?.code === 'unrecognized_keys'
      ? 'absent: it is not a createRedisClient option'
      : (issue?.message ?? 'a valid option');
  let received: unknown = options;
  for (const key of path) received = (received as Record<string, unknown> | undefined)?.[key];
  throw new InvalidInputError(field, expected, received);
}
