/**
 * Scope → Redis key: key scheme v2.
 *
 * `<namespace>:{<tenant hash>}:<policy id>[:<rest hash>]`, e.g.
 * `rate:{07fad54f7446269afc481e306a48f046}:fw.17b030aa42ef23f5:1966b0d8b8c859e1eca065c53cd5f4dd`
 *
 * - `<tenant hash>`: the first 128 bits (32 hex) of SHA-256 of `JSON.stringify([tenant])`,
 *   inside a hash tag. The Redis Cluster slot depends on the tenant alone, so every key of
 *   one tenant — tenant-wide, per route, per user, under every policy — shares one slot, and
 *   one script can decide several of them atomically (`takeAll`).
 * - `<policy id>`: the policy's identity (see `Policy.id`): its algorithm tag and a digest of
 *   its name, every parameter and its version. Two policies that differ in any of these
 *   never share state.
 * - `<rest hash>`: the first 128 bits of SHA-256 of `JSON.stringify([route, user])` (an
 *   absent part is `null`); omitted for a tenant-wide scope (no route, no user).
 *
 * Structure-safe: the JSON array encoding keeps `["a:b","c"]` and `["a","b:c"]`
 * apart, and lone surrogates are escaped, so every scope has one encoding. No caller text
 * reaches Redis — it cannot form a hash tag or a glob — and the key's length is bounded
 * (at most 64 + 2 + 32 + 2 + 21 + 1 + 32 = 154 characters). Hashing is not encryption: a known
 * tenant id can be hashed and found.
 *
 * Scheme v1 (`<namespace>:<tag>:v<version>:{<hash>}`) keys are never read by this version;
 * they expire on their own TTLs.
 */
import { createHash, hash } from 'node:crypto';
import { boundedMemo, boundedPairMemo } from './bounded-memo.js';

/** One-shot `crypto.hash` (Node ≥ 20.12) costs about a third of a Hash object per call. */
const sha256hex: (text: string) => string =
  typeof hash === 'function'
    ? (text) => hash('sha256', text, 'hex')
    : (text) => createHash('sha256').update(text).digest('hex');

/** Hex characters kept of each SHA-256 digest in a key (128 bits). */
const DIGEST_HEX = 32;

/** SHA-256 (first 128 bits, hex) of `JSON.stringify(parts)`. */
export function digest(parts: readonly unknown[], hexChars = DIGEST_HEX): string {
  return sha256hex(JSON.stringify(parts)).slice(0, hexChars);
}

/**
 * Entries of each key-digest memo: what a busy process meets again and again (its routes,
 * its largest tenants) is hashed once, not on every call (a SHA-256 is about half a µs, two
 * per key). At most 1,024 entries per memo, each keyed by its scope parts (up to 256
 * characters each).
 */
const MEMO_ENTRIES = 1024;

/** `{digest([tenant])}`, memoized. */
const tenantTags = boundedMemo((tenant: string) => `{${digest([tenant])}}`, MEMO_ENTRIES);
/** `digest([route ?? null, user ?? null])`, memoized. */
const restDigest = boundedPairMemo(
  (route: string | undefined, user: string | undefined) => digest([route ?? null, user ?? null]),
  MEMO_ENTRIES,
);

/** The hash tag of a tenant: `{<hash>}`. Every key of the tenant carries it. */
export function tenantTag(tenant: string): string {
  return tenantTags(tenant);
}

/**
 * The Redis key of one scope under one policy (key scheme v2, see the module's doc).
 *
 * @param namespace the limiter's namespace (validated by the limiter)
 * @param policyId the policy's `id`
 * @param route absent for a tenant-wide scope
 * @param user absent unless the scope is per user
 */
export function scopeKey(
  namespace: string,
  policyId: string,
  tenant: string,
  route: string | undefined,
  user: string | undefined,
  /** `tenantTag(tenant)`, when the caller already has it (several keys of one tenant). */
  tag = tenantTag(tenant),
): string {
  const base = `${namespace}:${tag}:${policyId}`;
  if (route === undefined && user === undefined) return base;
  return `${base}:${restDigest(route, user)}`;
}

/** The key of a namespace's reset epoch (see `reset-epoch.ts`). Outside every tenant's slot. */
export function resetEpochKey(namespace: string): string {
  return `${namespace}:reset-epoch`;
}
