/**
 * The guard's refusals: its own `429`, `503` and `401` (see `core.ts`), changed by the
 * application's `responses.*` hooks where it gave them. A hook may replace the body and add
 * headers; the status stays the guard's, and so do the headers a client acts on: the
 * `Retry-After` of a `429` or `503` and the RateLimit fields of a `429`. A hook that throws or
 * answers something unusable is reported as a process warning, and the guard's own response
 * is sent.
 */
import { observerFailed } from '../../observer.js';
import { refused } from '../../refused.js';
import type { Decision } from '../../types.js';
import {
  type HttpResponseSpec,
  limitedResponse,
  retryAfterSeconds,
  unavailableResponse,
  unidentifiedResponse,
} from '../core.js';
import type { ResponseChange, ResponseHooks } from './types.js';

/** The `429` of a refusal, with the RateLimit fields `rateLimit` (which no hook may change). */
export function limitedRefusal<Req>(
  hooks: ResponseHooks<Req>,
  req: Req,
  route: string,
  names: readonly string[],
  decisions: readonly Decision[],
  bound: number,
  rateLimit: Readonly<Record<string, string>>,
): HttpResponseSpec {
  // A refusal's violators: the policies that refused (see refused.ts), the rule the
  // decision events use too.
  const violated = names.filter((_, i) => refused(decisions[i] as Decision));
  const binding = decisions[bound] as Decision;
  const own = limitedResponse(binding, violated);
  return shape(
    hooks,
    'limited',
    {
      req,
      route,
      retryAfterSeconds: Number.isFinite(binding.retryAfterMs)
        ? retryAfterSeconds(binding.retryAfterMs)
        : undefined,
      violatedPolicies: violated,
      decisions,
      response: { ...own, headers: { ...own.headers, ...rateLimit } },
    },
    ['retry-after', ...Object.keys(rateLimit)],
  );
}

/** The `503` of a limiter failure (its `Retry-After` stays the guard's). */
export function unavailableRefusal<Req>(
  hooks: ResponseHooks<Req>,
  req: Req,
  route: string,
  error: unknown,
): HttpResponseSpec {
  return shape(hooks, 'unavailable', { req, route, error, response: unavailableResponse() }, [
    'retry-after',
  ]);
}

/** The `401` of a request without a verified identity, challenging with `challenge`. */
export function unidentifiedRefusal<Req>(
  hooks: ResponseHooks<Req>,
  req: Req,
  route: string,
  challenge: string,
): HttpResponseSpec {
  return shape(
    hooks,
    'unidentified',
    { req, route, response: unidentifiedResponse(challenge) },
    [],
  );
}

/** Applies a hook's change to a refusal; the status and `keep` headers stay the guard's. */
function shape<Req, C extends { response: HttpResponseSpec }>(
  hooks: ResponseHooks<Req>,
  name: keyof ResponseHooks<Req>,
  context: C,
  keep: readonly string[],
): HttpResponseSpec {
  const hook = hooks[name] as ((context: C) => ResponseChange | undefined) | undefined;
  const { response } = context;
  if (hook === undefined) return response;
  let change: ResponseChange | undefined;
  try {
    change = hook(context);
  } catch (error) {
    observerFailed(`responses.${name}`, error);
    return response;
  }
  if (change === undefined || change === null) return response;
  const problem = invalidChange(change);
  if (problem !== undefined) {
    observerFailed(`responses.${name}`, new Error(`${problem}; the guard's own response was sent`));
    return response;
  }
  const headers: Record<string, string> = { ...response.headers };
  for (const [header, value] of Object.entries(change.headers ?? {})) {
    const lower = header.toLowerCase();
    if (!keep.includes(lower)) headers[lower] = value;
  }
  return {
    status: response.status,
    headers,
    body: typeof change.body === 'string' ? change.body : response.body,
  };
}

/** A header field name (RFC 9110 §5.1: a token). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A header field value without control characters (no CR/LF: no injection). */
const HEADER_TEXT = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Why a hook's answer cannot be used, or undefined when it can. */
function invalidChange(change: unknown): string | undefined {
  if (typeof change !== 'object') return `it returned ${typeof change}, not { body, headers }`;
  if (typeof (change as { then?: unknown }).then === 'function') {
    return 'it returned a promise: hooks are synchronous';
  }
  const { body, headers } = change as { body?: unknown; headers?: unknown };
  if (body !== undefined && typeof body !== 'string') return 'its body is not a string';
  if (headers === undefined) return undefined;
  if (typeof headers !== 'object' || headers === null) return 'its headers are not an object';
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name)) return `header name ${JSON.stringify(name)} is not a token`;
    if (typeof value !== 'string' || !HEADER_TEXT.test(value)) {
      return `header ${name} has a value that is not printable text`;
    }
  }
  return undefined;
}
