/**
 * The operators' commands, run as a user runs them — the built `dist/cli/main.js` as a
 * child process with `--url` — against a private redis-server: `inspect` consumes and
 * changes nothing (every key's value and expiry time compared before and after), `reset`
 * deletes exactly the scope asked for (other tenants, users and policies untouched),
 * `stats` counts the keys of two namespaces per algorithm and warns under an evicting
 * `maxmemory-policy`, `check-config` answers 0/1 with every problem's path, and usage errors
 * and an unreachable Redis exit 2 with a message, never a stack trace.
 */
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Policy, Scope } from 'sluice';
import {
  fixedWindow,
  gcra,
  RateLimiter,
  slidingWindowCounter,
  slidingWindowLog,
  tokenBucket,
} from 'sluice';
import { loadPolicyConfig, routeLimits } from 'sluice/config';
import { type Client, TEST_TIMEOUT_MS, useRedis } from '../helpers/redis.js';

const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname;
const redis = useRedis();

const POLICY_FILE = {
  policies: {
    burst: { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
    hourly: { algorithm: 'sliding-window-log', limit: 50, windowMs: 3_600_000 },
    smooth: { algorithm: 'sliding-window-counter', limit: 20, windowMs: 60_000 },
    api: { algorithm: 'token-bucket', capacity: 100, refillIntervalMs: 60_000 },
    steady: { algorithm: 'gcra', limit: 10, periodMs: 60_000 },
  },
  routes: {
    'POST/orders': [
      'burst',
      { policy: 'hourly', per: 'route-user' },
      { policy: 'api', per: 'tenant' },
    ],
    'GET/search': [{ policy: 'smooth', per: 'user' }, 'steady', { policy: 'api', per: 'tenant' }],
  },
  plans: {
    pro: {
      'POST/orders': [
        { algorithm: 'fixed-window', name: 'burst-pro', limit: 50, windowMs: 60_000 },
        { policy: 'api', per: 'tenant' },
      ],
    },
  },
  tenants: { acme: { plan: 'pro' } },
};

let dir = '';
let file = '';
before(() => {
  assert.ok(existsSync(cli), 'dist/ is missing: run `npm run build` (npm test does)');
  dir = mkdtempSync(join(tmpdir(), 'sluice-cli-'));
  file = join(dir, 'policies.json');
  writeFileSync(file, JSON.stringify(POLICY_FILE, null, 2));
});
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the CLI; stdin is a pipe (never a terminal). */
function sluice(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [cli, ...args],
      { env: { ...process.env, REDIS_URL: '', ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

const url = () => ['--url', redis.server.url];
const json = (run: Run) => JSON.parse(run.stdout);
const noStack = (run: Run) => assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');

/** Every key of the database with its type, value (DUMP) and absolute expiry time. */
async function snapshot(admin: Client): Promise<Map<string, string>> {
  const keys = (await admin.client.sendCommand(['KEYS', '*'])) as string[]; // a test server only
  const out = new Map<string, string>();
  for (const key of keys.sort()) {
    const dump = (await admin.client.sendCommand(['DUMP', key])) as string | null;
    const expires = await admin.client.sendCommand(['PEXPIRETIME', key]);
    out.set(key, `${Buffer.from(dump ?? '', 'latin1').toString('hex')} @${String(expires)}`);
  }
  return out;
}

/**
 * `snap` without the keys whose expiry time (PEXPIRETIME, in a {@link snapshot} entry) is
 * `at` or earlier: a key that expired on its own is not one a command deleted.
 */
function liveAt(snap: Map<string, string>, at: number): Map<string, string> {
  return new Map(
    [...snap].filter(([, entry]) => {
      const expiresAt = Number(entry.slice(entry.lastIndexOf('@') + 1));
      return expiresAt < 0 || expiresAt > at;
    }),
  );
}

/** The scope a limit counts on (as the guard builds it). */
function scopeOf(per: string, tenant: string, route: string, user: string): Scope {
  if (per === 'tenant') return { tenant };
  if (per === 'user') return { tenant, user };
  if (per === 'route-user') return { tenant, route, user };
  return { tenant, route };
}

/** Takes `n` times every limit of `route` for `tenant`/`user`; returns each limit's key. */
async function spend(
  limiter: RateLimiter,
  route: string,
  tenant: string,
  user: string,
  n: number,
): Promise<Map<string, string>> {
  const config = loadPolicyConfig(file);
  const { limits, names } = routeLimits(config, route, tenant);
  const items = limits.map((l) => ({
    scope: scopeOf(l.per, tenant, route, user),
    policy: l.policy,
  }));
  for (let i = 0; i < n; i++) assert.equal((await limiter.takeAll(items)).allowed, true);
  return new Map(
    items.map((item, i) => [names[i] as string, limiter.keyOf(item.scope, item.policy)]),
  );
}

describe('sluice inspect', () => {
  it('shows each limit’s decision, key and PTTL for the tenant’s plan, and changes nothing in Redis', async () => {
    const client = await redis.client();
    const admin = await redis.admin();
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client });
    const orders = await spend(limiter, 'POST/orders', 'globex', 'bob', 2);
    const search = await spend(limiter, 'GET/search', 'globex', 'bob', 3);
    await spend(limiter, 'POST/orders', 'acme', 'ann', 1);
    const before = await snapshot(admin);
    assert.ok(before.size >= 6, `${before.size} keys`);

    const args = ['--config', file, '--tenant', 'globex', '--user', 'bob', ...url()];
    const [text, asJson, acme, searchJson] = await Promise.all([
      sluice(['inspect', '--route', 'POST/orders', ...args]),
      sluice(['inspect', '--route', 'POST/orders', '--json', ...args]),
      sluice([
        'inspect',
        '--route',
        'POST/orders',
        '--json',
        ...args.slice(0, 2),
        '--tenant',
        'acme',
        ...url(),
      ]),
      sluice(['inspect', '--route', 'GET/search', '--json', ...args]),
    ]);
    const after = await snapshot(admin);
    const seenAt = Date.now();
    assert.deepEqual(
      liveAt(after, seenAt),
      liveAt(before, seenAt),
      'no key changed: values and expiry times',
    );

    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      /^POST\/orders for tenant "globex", user "bob": no plan; limits from routes\["POST\/orders"\]/,
    );
    // The units left now (5 − 2 spent) and when the scope is clean again (the window's end),
    // then what a take of 1 would decide.
    assert.match(
      text.stdout,
      /burst {2}fixed-window, 5 per 60 s, per route\n {2}left now {4}3 of 5, clean again in [0-9.]+ s\n {2}a take now {2}allowed\n/,
    );
    assert.match(
      text.stdout,
      /hourly {2}[^\n]*\n {2}left now {4}48 of 50, clean again in [0-9]+ min( [0-9]+ s)?\n/,
    );
    assert.match(text.stdout, /A request now would be admitted: every limit admits it\./);

    assert.equal(asJson.code, 0, asJson.stderr);
    const report = json(asJson);
    assert.equal(report.allowed, true);
    assert.deepEqual(
      report.limits.map((l: { name: string; per: string; key: string }) => [l.name, l.per, l.key]),
      [
        ['burst', 'route', orders.get('burst')],
        ['hourly', 'route-user', orders.get('hourly')],
        ['api', 'tenant', orders.get('api')],
      ],
    );
    for (const limit of report.limits) {
      assert.equal(limit.exists, true, limit.name);
      assert.ok(
        limit.pttlMs > 0 && limit.pttlMs <= limit.windowMs * 60,
        `${limit.name} ${limit.pttlMs}`,
      );
    }
    // The units left now: 5 − 2 spent, 50 − 2 spent; the scopes have state.
    assert.deepEqual(
      report.limits.map((l: { decision: { remaining: number; allowed: boolean } }) => [
        l.decision.remaining,
        l.decision.allowed,
      ]),
      [
        [3, true],
        [48, true],
        [95, true], // the tenant-wide api: 2 orders and 3 searches spent
      ],
    );
    for (const limit of report.limits) assert.equal(limit.fresh, false, limit.name);
    // The fixed window is clean again when its key expires: the peek's resetMs is the PTTL
    // read just after it.
    const burst = report.limits[0];
    assert.ok(
      burst.decision.resetMs >= burst.pttlMs && burst.decision.resetMs - burst.pttlMs < 5000,
      `burst: resetMs ${burst.decision.resetMs}, then PTTL ${burst.pttlMs}`,
    );
    for (const limit of report.limits) assert.ok(limit.decision.resetMs > 0, limit.name);

    // acme is on plan pro: its limits are the plan's.
    const pro = json(acme);
    assert.deepEqual(
      [pro.plan, pro.planFrom, pro.source],
      ['pro', 'tenants.acme.plan', 'plans.pro["POST/orders"]'],
    );
    assert.deepEqual(
      pro.limits.map((l: { name: string }) => l.name),
      ['burst-pro', 'api'],
    );

    const s = json(searchJson);
    assert.deepEqual(
      s.limits.map((l: { name: string; key: string; algorithm: string }) => [
        l.name,
        l.algorithm,
        l.key,
      ]),
      [
        ['smooth', 'sliding-window-counter', search.get('smooth')],
        ['steady', 'gcra', search.get('steady')],
        ['api', 'token-bucket', search.get('api')],
      ],
    );
  });

  it('a scope without state says so: no state, a fresh quota, every unit left; a cost above what is left is refused', async () => {
    const admin = await redis.admin();
    const before = await snapshot(admin);
    const base = ['inspect', '--config', file, '--route', 'POST/orders', '--tenant', 'hooli-fresh'];
    const [text, asJson, big] = await Promise.all([
      sluice([...base, '--user', 'nobody', ...url()]),
      sluice([...base, '--user', 'nobody', '--json', ...url()]),
      sluice([...base, '--user', 'nobody', '--cost', '6', '--json', ...url()]),
    ]);
    // Nothing written (a key that expired on its own meanwhile is not compared: a slow run
    // saw an earlier test's GCRA key go).
    const after = await snapshot(admin);
    const seenAt = Date.now();
    assert.deepEqual(liveAt(after, seenAt), liveAt(before, seenAt), 'no key written');
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      /burst {2}fixed-window, 5 per 60 s, per route\n {2}left now {4}no state: a fresh quota, 5 of 5 left\n {2}a take now {2}allowed\n {2}key {9}rate:\{[0-9a-f]{32}\}:fw\.[0-9a-f]{16}:[0-9a-f]{32}\n {2}PTTL {8}no key \(no state: a fresh quota\)\n/,
    );
    assert.match(text.stdout, /left now {4}no state: a fresh quota, 50 of 50 left\n/);
    assert.match(text.stdout, /left now {4}no state: a fresh quota, 100 of 100 left\n/);
    assert.match(text.stdout, /A request now would be admitted: every limit admits it\./);

    const report = json(asJson);
    assert.equal(report.allowed, true);
    for (const limit of report.limits) {
      assert.deepEqual(
        [limit.exists, limit.fresh, limit.decision.allowed, limit.decision.remaining],
        [false, true, true, limit.limit],
        limit.name,
      );
      assert.equal(limit.decision.retryAfterMs, 0, limit.name);
      assert.equal(limit.decision.resetMs, 0, `${limit.name}: clean now`);
    }

    // A cost of 6: more than the burst limit of 5 can ever admit, within the others.
    const refused = json(big);
    assert.equal(refused.allowed, false);
    assert.deepEqual(
      refused.limits.map((l: { decision: { allowed: boolean; remaining: number } }) => [
        l.decision.allowed,
        l.decision.remaining,
      ]),
      [
        [false, 5],
        [true, 50],
        [true, 100],
      ],
    );
    assert.equal(refused.limits[0].decision.retryAfterMs, null, 'never fits (Infinity)');
  });

  it('a denial is shown (and spends nothing); limits per user need --user; an unknown route is exit 1', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    await spend(limiter, 'POST/orders', 'initech', 'eve', 5);
    const admin = await redis.admin();
    const before = await snapshot(admin);
    const base = ['inspect', '--config', file, '--tenant', 'initech', ...url()];
    const [denied, deniedText, noUser, noRoute] = await Promise.all([
      sluice([...base, '--route', 'POST/orders', '--user', 'eve', '--json']),
      sluice([...base, '--route', 'POST/orders', '--user', 'eve']),
      sluice([...base, '--route', 'POST/orders']),
      sluice([...base, '--route', 'POST/nope', '--json']),
    ]);
    // Nothing written (a key that expired on its own meanwhile is not compared).
    const after = await snapshot(admin);
    const seenAt = Date.now();
    assert.deepEqual(liveAt(after, seenAt), liveAt(before, seenAt));
    const report = json(denied);
    assert.equal(report.allowed, false);
    assert.equal(report.limits[0].decision.allowed, false);
    assert.ok(report.limits[0].decision.retryAfterMs > 0);
    assert.equal(report.limits[0].decision.remaining, 0);
    assert.equal(report.limits[0].fresh, false);
    assert.match(
      deniedText.stdout,
      /burst {2}[^\n]*\n {2}left now {4}0 of 5, clean again in [0-9.]+ s\n {2}a take now {2}refused, retry in [0-9.]+ s\n/,
    );
    assert.match(
      deniedText.stdout,
      /A request now would be refused by burst \(and spend nothing\)\./,
    );
    assert.equal(noUser.code, 2);
    assert.match(noUser.stderr, /--user is needed: "hourly" counts per user on this route/);
    assert.equal(noRoute.code, 1);
    assert.match(noRoute.stderr, /no route "POST\/nope"/);
    assert.deepEqual(json(noRoute).routes, ['POST/orders', 'GET/search']);
  });
});

describe('sluice reset', () => {
  it('deletes exactly the scope asked for: one policy, then the route’s limits; other tenants, users and policies untouched', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const admin = await redis.admin();
    const mine = await spend(limiter, 'POST/orders', 'umbrella', 'u1', 2);
    const otherUser = await spend(limiter, 'POST/orders', 'umbrella', 'u2', 1);
    const otherTenant = await spend(limiter, 'POST/orders', 'hooli', 'u1', 1);
    const search = await spend(limiter, 'GET/search', 'umbrella', 'u1', 1);
    const args = [
      'reset',
      '--config',
      file,
      '--route',
      'POST/orders',
      '--tenant',
      'umbrella',
      '--user',
      'u1',
      ...url(),
    ];

    // Without a terminal and without --yes: refused, nothing deleted.
    const before = await snapshot(admin);
    const refused = await sluice(args);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /stdin is not a terminal \(add --yes\)/);
    // Nothing deleted: the keys live now are as they were (a GCRA key of an earlier test may
    // have expired on its own meanwhile: a loaded run saw one go).
    const unchanged = await snapshot(admin);
    const refusedAt = Date.now();
    assert.deepEqual(liveAt(unchanged, refusedAt), liveAt(before, refusedAt));

    // One policy: only its key for this user on this route.
    const one = await sluice([...args, '--policy', 'hourly', '--yes']);
    assert.equal(one.code, 0, one.stderr);
    assert.match(one.stdout, /^deleted {3}hourly {2}rate:\{/m);
    const after = await snapshot(admin);
    const hourly = mine.get('hourly') as string;
    assert.equal(after.has(hourly), false);
    // Every other key of this test's scopes is as it was (a GCRA key may have expired on its
    // own meanwhile). Keys of earlier tests are not compared: a slow run has seen one of them
    // change under the comparison.
    const seenAt = Date.now();
    const live = liveAt(before, seenAt);
    const ours = [
      ...mine.values(),
      ...otherUser.values(),
      ...otherTenant.values(),
      ...search.values(),
    ];
    const kept = [...new Set(ours)].filter((key) => key !== hourly && live.has(key));
    assert.ok(kept.length >= 6, `${kept.length} keys compared`);
    assert.deepEqual(
      new Map(kept.map((key) => [key, before.get(key)])),
      new Map(kept.map((key) => [key, after.get(key)])),
      'no other key deleted or changed',
    );
    // The reset epoch changed: every limiter's denial cache follows.
    assert.notEqual(after.get('rate:reset-epoch'), undefined);

    // Every limit of the route, as JSON: with --include-shared, the route's and the
    // tenant-wide ones too.
    const all = await sluice([...args, '--include-shared', '--yes', '--json']);
    assert.equal(all.code, 0, all.stderr);
    assert.deepEqual(
      json(all).reset.map((r: { name: string; key: string; deleted: boolean }) => [
        r.name,
        r.key,
        r.deleted,
      ]),
      [
        ['burst', mine.get('burst'), true],
        ['hourly', hourly, false],
        ['api', mine.get('api'), true],
      ],
    );
    assert.deepEqual(json(all).left, []);
    const left = await snapshot(admin);
    for (const key of mine.values()) assert.equal(left.has(key), false, key);
    const reset = new Set(mine.values());
    // A key that expired on its own meanwhile (a GCRA key lives only its TAT's lead: a slow
    // run outlived one) is not one the reset deleted.
    const stillLive = liveAt(before, Date.now());
    for (const [name, key] of [...otherTenant, ...search]) {
      if (reset.has(key)) continue; // umbrella's tenant-wide "api" is on both routes
      if (!stillLive.has(key)) continue;
      assert.equal(left.get(key), before.get(key), name);
    }
    // u2's own per-user key is untouched; the route and tenant ones were shared with u1.
    assert.equal(
      left.get(otherUser.get('hourly') as string),
      before.get(otherUser.get('hourly') as string),
    );

    const unknown = await sluice([...args, '--policy', 'nope', '--yes']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no limit named "nope".*\nIts limits: burst, hourly, api/);
  });

  it('--user resets only what is the user’s own; --include-shared also the tenant’s shared limits; without --user only the shared ones', async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const admin = await redis.admin();
    const u1 = await spend(limiter, 'POST/orders', 'stark', 'u1', 2);
    const u2 = await spend(limiter, 'POST/orders', 'stark', 'u2', 1);
    const base = ['reset', '--config', file, '--route', 'POST/orders', '--tenant', 'stark'];
    // The keys of this test only: another test's may expire meanwhile.
    const keys = new Set([...u1.values(), ...u2.values()]);
    const withoutEpoch = (m: Map<string, string>) =>
      new Map([...m].filter(([key]) => keys.has(key)));
    const changed = (a: Map<string, string>, b: Map<string, string>) =>
      [...new Set([...a.keys(), ...b.keys()])].filter((k) => a.get(k) !== b.get(k)).sort();

    // --user: only u1's own key; the route's and the tenant's, which u2 shares, are left.
    let before = withoutEpoch(await snapshot(admin));
    const own = await sluice([...base, '--user', 'u1', '--yes', ...url()]);
    assert.equal(own.code, 0, own.stderr);
    assert.deepEqual(changed(before, withoutEpoch(await snapshot(admin))), [u1.get('hourly')]);
    assert.match(own.stdout, /the state of:\n {2}hourly {2}per user on this route\n/);
    assert.match(
      own.stdout,
      /left as it is:\n {2}burst {2}counted per route, shared by every user of tenant "stark": add --include-shared/,
    );
    assert.match(own.stdout, /^Left as they are \(see above\): burst, api\.$/m);
    const ownJson = json(await sluice([...base, '--user', 'u1', '--yes', '--json', ...url()]));
    assert.deepEqual(
      ownJson.reset.map((r: { name: string }) => r.name),
      ['hourly'],
    );
    assert.deepEqual(
      ownJson.left.map((l: { name: string; per: string; key: string }) => [l.name, l.per, l.key]),
      [
        ['burst', 'route', u1.get('burst')],
        ['api', 'tenant', u1.get('api')],
      ],
    );
    assert.equal(ownJson.includeShared, false);

    // Without --user: the shared limits; every user's own key is left (no scan finds them).
    before = withoutEpoch(await snapshot(admin));
    const shared = await sluice([...base, '--yes', '--json', ...url()]);
    assert.equal(shared.code, 0, shared.stderr);
    assert.deepEqual(
      changed(before, withoutEpoch(await snapshot(admin))),
      [u1.get('api'), u1.get('burst')].sort(),
    );
    assert.equal(await admin.client.exists(u2.get('hourly') as string), 1);
    assert.deepEqual(
      json(shared).left.map((l: { name: string; key: null }) => [l.name, l.key]),
      [['hourly', null]],
    );
    assert.match(json(shared).left[0].reason, /give --user.*scan of the keyspace/);

    // Refused, nothing changed: --user on a route with no limit per user (acme's plan on
    // POST/orders), --include-shared without --user, --policy of a limit the options leave.
    before = withoutEpoch(await snapshot(admin));
    const epoch = await admin.client.get('rate:reset-epoch');
    const refusals = await Promise.all([
      sluice([...base.slice(0, -1), 'acme', '--user', 'ann', '--yes', ...url()]),
      sluice([...base, '--include-shared', '--yes', ...url()]),
      sluice([...base, '--user', 'u1', '--policy', 'burst', '--yes', ...url()]),
      sluice([...base, '--policy', 'hourly', '--yes', ...url()]),
    ]);
    assert.deepEqual(withoutEpoch(await snapshot(admin)), before);
    assert.equal(await admin.client.get('rate:reset-epoch'), epoch);
    assert.deepEqual(
      refusals.map((r) => r.code),
      [2, 2, 2, 2],
    );
    assert.match(
      refusals[0]?.stderr ?? '',
      /--user: no limit of POST\/orders for tenant "acme" is counted per user \(its limits: burst-pro per route, api per tenant\)/,
    );
    assert.match(refusals[1]?.stderr ?? '', /--include-shared goes with --user/);
    assert.match(refusals[2]?.stderr ?? '', /--policy burst: .*add --include-shared/);
    assert.match(refusals[3]?.stderr ?? '', /--policy hourly: .*give --user/);
  });

  const hasScript = spawnSync('script', ['--version']).status === 0;
  it('asks on a terminal: only "yes" deletes', {
    skip: hasScript ? false : 'no script(1) for a terminal',
  }, async () => {
    const limiter = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client: await redis.client() });
    const admin = await redis.admin();
    const keys = await spend(limiter, 'GET/search', 'wonka', 'w1', 1);
    const command = [
      cli,
      'reset',
      '--config',
      file,
      '--route',
      'GET/search',
      '--tenant',
      'wonka',
      '--user',
      'w1',
      '--include-shared',
      ...url(),
    ]
      .map((a) => `'${a}'`)
      .join(' ');
    const answer = (input: string) =>
      spawnSync('script', ['-qec', `'${process.execPath}' ${command}`, '/dev/null'], {
        input,
        encoding: 'utf8',
        timeout: 20_000,
      });
    const no = answer('no\n');
    assert.equal(no.status, 1, no.stdout);
    assert.match(no.stdout, /Type "yes"/);
    assert.match(no.stdout, /not confirmed: nothing deleted/);
    for (const key of keys.values()) assert.equal(await admin.client.exists(key), 1);
    const yes = answer('yes\n');
    assert.equal(yes.status, 0, yes.stdout);
    for (const key of keys.values()) assert.equal(await admin.client.exists(key), 0);
  });
});

describe('sluice stats', () => {
  it('counts the live keys of two namespaces per algorithm; warns when the eviction policy can evict them', async () => {
    // Namespaces of their own: the other tests' keys are in "rate".
    const client = await redis.client();
    const admin = await redis.admin();
    const rate = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client, namespace: 'st-rate' });
    const ip = new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client, namespace: 'st-ip' });
    const fw = fixedWindow({ limit: 5, windowMs: 60_000 });
    const tb = tokenBucket({ capacity: 5, refillIntervalMs: 60_000 });
    const policies: [RateLimiter, Scope, Policy][] = [
      [rate, { tenant: 'a', route: 'GET/x' }, fw],
      [rate, { tenant: 'b', route: 'GET/x' }, fw],
      [rate, { tenant: 'a' }, tb],
      [ip, { tenant: '203.0.113.7', route: 'POST/login' }, gcra({ limit: 5, periodMs: 60_000 })],
      [
        ip,
        { tenant: '203.0.113.7', route: 'POST/login' },
        slidingWindowLog({ limit: 5, windowMs: 60_000 }),
      ],
      [
        ip,
        { tenant: '203.0.113.8', user: 'x' },
        slidingWindowCounter({ limit: 5, windowMs: 60_000 }),
      ],
    ];
    for (const [limiter, scope, policy] of policies) await limiter.take(scope, policy);
    await admin.client.set('st-app:cache', 'not a sluice key');
    // A reset epoch, a key of sluice's shape whose tag this version does not read, and a
    // key of the namespace "st-rate:x", which MATCH st-rate:* finds too.
    await rate.reset({ tenant: 'c', route: 'GET/x' }, fw);
    const hex = (n: number) => 'ab'.repeat(n / 2);
    await admin.client.set(`st-rate:{${hex(32)}}:swl.${hex(16)}:${hex(32)}`, 'x', { PX: 60_000 });
    await new RateLimiter({ timeoutMs: TEST_TIMEOUT_MS, client, namespace: 'st-rate:x' }).take(
      { tenant: 'a' },
      fw,
    );

    const [all, only] = await Promise.all([
      sluice(['stats', '--json', ...url()]),
      sluice(['stats', '--namespace', 'st-ip', '--json', ...url()]),
    ]);
    assert.equal(all.code, 0, all.stderr);
    const report = json(all);
    assert.deepEqual(report.namespaces['st-rate'], {
      keys: 3,
      algorithms: {
        'fixed-window': 2,
        'sliding-window-log': 0,
        'sliding-window-counter': 0,
        'token-bucket': 1,
        gcra: 0,
        concurrency: 0,
      },
      tenantWideKeys: 1,
      tenants: 2,
      resetEpoch: true,
      blocks: 0,
      idRecords: 0,
      reservations: 0,
    });
    assert.deepEqual(report.namespaces['st-ip'].algorithms, {
      'fixed-window': 0,
      'sliding-window-log': 1,
      'sliding-window-counter': 1,
      'token-bucket': 0,
      gcra: 1,
      concurrency: 0,
    });
    assert.equal(report.namespaces['st-ip'].tenants, 2);
    assert.ok(report.otherKeys >= 1);
    assert.ok(report.otherKeysByKind.unknownKind >= 1);
    // Every key scanned is counted once: in a namespace, as a reset epoch, or as another kind.
    const namespaces = Object.values(report.namespaces) as { keys: number; resetEpoch: boolean }[];
    assert.equal(
      namespaces.reduce((n, c) => n + c.keys + (c.resetEpoch ? 1 : 0), 0) + report.otherKeys,
      report.scan.scanned,
    );
    assert.equal(
      report.otherKeys,
      Object.values(report.otherKeysByKind as Record<string, number>).reduce((a, b) => a + b),
    );
    assert.equal(report.scan.complete, true);
    assert.equal(report.server.maxmemoryPolicy, 'noeviction');
    assert.equal(report.server.role, 'master');
    assert.match(report.server.version, /^\d+\.\d+\.\d+$/);
    assert.deepEqual(report.warnings, []);
    assert.deepEqual(Object.keys(json(only).namespaces), ['st-ip']);
    assert.equal(json(only).namespaces['st-ip'].keys, 3);

    await admin.client.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru']);
    try {
      const text = await sluice(['stats', '--namespace', 'st-rate', ...url()]);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /maxmemory-policy allkeys-lru/);
      // The lines of the text account for every key scanned.
      const scanned = Number(/^scanned: (\d+) keys/m.exec(text.stdout)?.[1]);
      const kinds =
        /^the \d+ keys scanned, by kind:\n((?: {2}.*\n)+)/m.exec(text.stdout)?.[1] ?? '';
      const lines = kinds.trimEnd().split('\n');
      const byKind = Object.fromEntries(
        lines.map((l) => {
          const m = /^ {2}(.*?) +(\d+)$/.exec(l);
          return [m?.[1], Number(m?.[2])];
        }),
      );
      assert.deepEqual(byKind, {
        'sluice keys (the table above)': 3,
        'reset epochs (<namespace>:reset-epoch)': 1,
        'blocks of scopes (<key>:b)': 0,
        'records of retry-safe operations (…:id:…)': 0,
        'records of reservations (…:rsv:…)': 0,
        'sluice keys of an algorithm tag unknown here (another version’s)': 1,
        'sluice keys of other namespaces under st-rate:*': 1,
        'other keys (not sluice’s)': 0,
      });
      assert.equal(
        Object.values(byKind as Record<string, number>).reduce((a, b) => a + b),
        scanned,
      );
      assert.equal(scanned, 6);
      assert.match(text.stdout, /^namespace +keys +tenants +fixed-window .*\nst-rate +3 +2 +2 /m);
      assert.match(
        text.stderr,
        /^warning: maxmemory-policy is allkeys-lru: under memory pressure Redis evicts keys, quota keys included/m,
      );
      await admin.client.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'volatile-ttl']);
      const volatile = json(await sluice(['stats', '--json', ...url()]));
      assert.match(volatile.warnings[0], /volatile-ttl.*every sluice key has a TTL/);
    } finally {
      await admin.client.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'noeviction']);
    }
  });

  it('stops at --max-seconds and says the counts are partial', async () => {
    const admin = await redis.admin();
    const batch: string[] = [];
    for (let i = 0; i < 3000; i++) batch.push(`st-filler:${i}`, 'x');
    await admin.client.sendCommand(['MSET', ...batch]);
    const cut = await sluice([
      'stats',
      '--max-seconds',
      '0.001',
      '--count',
      '10',
      '--json',
      ...url(),
    ]);
    assert.equal(cut.code, 0, cut.stderr);
    const report = json(cut);
    assert.equal(report.scan.complete, false);
    assert.ok(report.scan.scanned < report.scan.dbsize, `${report.scan.scanned}`);
    assert.match(report.warnings.at(-1), /^partial: the scan stopped after 0.001 s/);
  });
});

describe('sluice check-config', () => {
  it('a valid file: exit 0 and a summary', async () => {
    const [text, asJson] = await Promise.all([
      sluice(['check-config', file]),
      sluice(['check-config', file, '--json']),
    ]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /valid \(format 2\): 2 routes, 6 named policies, 1 plan, 1 tenant/);
    assert.match(
      text.stdout,
      /POST\/orders {2}burst \+ hourly per route-user \+ api per tenant\n {4}plan pro: burst-pro \+ api per tenant/,
    );
    const report = json(asJson);
    assert.equal(report.valid, true);
    assert.deepEqual(
      report.routes.map((r: { route: string; perTenant: boolean }) => [r.route, r.perTenant]),
      [
        ['POST/orders', true],
        ['GET/search', false],
      ],
    );
    // Each policy's parameters as the file writes them (not a token bucket's or GCRA's
    // internal burst and refill time).
    const policies = new Map(
      report.policies.map((p: { name: string; id: string; version: string }) => {
        const { id: _, version: __, ...rest } = p;
        return [p.name, rest];
      }),
    );
    assert.deepEqual(policies.get('api'), {
      name: 'api',
      algorithm: 'token-bucket',
      capacity: 100,
      refillTokens: 1,
      refillIntervalMs: 60_000,
      description: 'token-bucket, 100 tokens, 1 more every 60 s',
    });
    assert.deepEqual(policies.get('steady'), {
      name: 'steady',
      algorithm: 'gcra',
      limit: 10,
      periodMs: 60_000,
      burst: 10,
      description: 'gcra, 10 per 60 s, bursts of 10',
    });
    assert.deepEqual(policies.get('burst'), {
      name: 'burst',
      algorithm: 'fixed-window',
      limit: 5,
      windowMs: 60_000,
      description: 'fixed-window, 5 per 60 s',
    });
  });

  it('an invalid file: exit 1 and every problem with its path; not JSON: 1; unreadable: 2', async () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(
      bad,
      JSON.stringify({
        policies: { a: { algorithm: 'fixed-window', limit: 0, windowMs: 1000 } },
        routes: {
          'POST/orders': { policy: ['a', { algorithm: 'gcra', limit: 1.5, periodMs: 1 }], cots: 2 },
          '/orders?x=1': 'a',
        },
        plans: { pro: { 'GET/search': [{ algorithm: 'leaky' }] } },
        tenants: { acme: { plan: 'gold' } },
      }),
    );
    const notJson = join(dir, 'not.json');
    writeFileSync(notJson, '{ "routes": ');
    const [text, asJson, broken, missing] = await Promise.all([
      sluice(['check-config', bad]),
      sluice(['check-config', bad, '--json']),
      sluice(['check-config', notJson]),
      sluice(['check-config', join(dir, 'missing.json')]),
    ]);
    const fields = [
      'policies.a.limit',
      'routes["POST/orders"].cots',
      'routes["POST/orders"].policy[1].limit',
      'routes["/orders?x=1"]',
      'plans.pro["GET/search"][0].algorithm',
      'tenants.acme.plan',
    ];
    assert.equal(text.code, 1);
    assert.match(text.stderr, new RegExp(`invalid, ${fields.length} problems:`));
    for (const field of fields) assert.ok(text.stderr.includes(`  ${field} must be `), field);
    assert.equal(asJson.code, 1);
    assert.deepEqual(
      json(asJson).errors.map((e: { field: string }) => e.field),
      fields,
    );
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, /is not JSON/);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read .*missing\.json/);
    for (const run of [text, broken, missing]) noStack(run);

    // inspect and reset refuse an invalid file the same way (exit 1), before any Redis.
    const inspect = await sluice([
      'inspect',
      '--config',
      bad,
      '--route',
      'POST/orders',
      '--tenant',
      't',
      '--url',
      'redis://127.0.0.1:1',
    ]);
    assert.equal(inspect.code, 1);
    assert.match(inspect.stderr, /not a valid policy file \(6 problems/);
    assert.ok(inspect.stderr.includes('tenants.acme.plan must be'));
  });

  it('each problem quotes the value: of the file (a misspelt failureMode), of --tenant and --user', async () => {
    const typo = join(dir, 'typo.json');
    writeFileSync(
      typo,
      JSON.stringify({
        routes: {
          'POST/a': {
            algorithm: 'fixed-window',
            limit: 1,
            windowMs: 1000,
            failureMode: 'failopen',
          },
        },
      }),
    );
    const scope = ['--config', file, '--route', 'GET/search', ...url()];
    const [check, longTenant, emptyUser] = await Promise.all([
      sluice(['check-config', typo]),
      sluice(['inspect', ...scope, '--tenant', 't'.repeat(70_000), '--user', 'u']),
      sluice(['reset', ...scope, '--tenant', 't', '--user', '', '--yes']),
    ]);
    assert.equal(check.code, 1);
    assert.ok(
      check.stderr.includes(
        'routes["POST/a"].failureMode must be "fail-closed" or "fail-open"; received string "failopen"',
      ),
      check.stderr,
    );
    assert.equal(longTenant.code, 2);
    assert.ok(
      longTenant.stderr.includes(
        `--tenant must be a non-empty string of at most 65536 characters; received string "${'t'.repeat(60)}…" (70,000 characters)`,
      ),
      longTenant.stderr,
    );
    assert.equal(emptyUser.code, 2);
    assert.ok(
      emptyUser.stderr.includes(
        '--user must be a non-empty string of at most 65536 characters; received string ""',
      ),
      emptyUser.stderr,
    );
  });

  it('a key twice in one object: exit 1 with its path, for check-config, inspect and reset', async () => {
    const dup = join(dir, 'dup.json');
    const fw = '{"algorithm": "fixed-window", "limit": 1, "windowMs": 1000}';
    writeFileSync(dup, `{"routes": {"GET/a": ${fw}, "GET/b": ${fw}, "GET/a": ${fw}}}`);
    const scope = [
      '--config',
      dup,
      '--route',
      'GET/a',
      '--tenant',
      't',
      '--url',
      'redis://127.0.0.1:1',
    ];
    const [text, asJson, inspect, reset] = await Promise.all([
      sluice(['check-config', dup]),
      sluice(['check-config', dup, '--json']),
      sluice(['inspect', ...scope]),
      sluice(['reset', ...scope, '--yes']),
    ]);
    const expected = 'a key that appears once in its object (it appears twice)';
    assert.equal(text.code, 1, text.stdout);
    assert.match(text.stderr, /invalid, 1 problem:/);
    assert.ok(text.stderr.includes(`  routes["GET/a"] must be ${expected}`), text.stderr);
    assert.equal(asJson.code, 1);
    assert.deepEqual(
      json(asJson).errors.map((e: { field: string; expected: string }) => [e.field, e.expected]),
      [['routes["GET/a"]', expected]],
    );
    for (const run of [inspect, reset]) {
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, /not a valid policy file \(1 problem;/);
      assert.ok(run.stderr.includes(`routes["GET/a"] must be ${expected}`), run.stderr);
    }
    for (const run of [text, inspect, reset]) noStack(run);
  });
});

describe('sluice: usage, setup, help', () => {
  it('usage errors exit 2 with the command’s usage', async () => {
    const runs = await Promise.all(
      [
        ['inspect', '--route', 'POST/orders', '--tenant', 't'],
        ['reset', '--config', 'x.json', '--route', 'POST/orders'],
        ['stats', '--max-seconds', '-1'],
        ['stats', '--count', 'many'],
        ['stats', '--namespace', 'a b'],
        ['check-config'],
        ['stats', '--bogus', '--json'],
        ['nope'],
        ['help', 'nope'],
        [],
      ].map((args) => sluice(args).then((run) => ({ args, run }))),
    );
    for (const { args, run } of runs) {
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, /error: |--namespace must be|^Usage: sluice/, args.join(' '));
      noStack(run);
    }
    assert.match(
      runs[0]?.run.stderr ?? '',
      /required option '--config <file>' not specified\n\nUsage: sluice inspect/,
    );
    // --json answers in JSON even for a usage error.
    assert.deepEqual(JSON.parse(runs[6]?.run.stdout ?? ''), {
      ok: false,
      error: "unknown option '--bogus'",
    });
  });

  it('an unreachable Redis or a bad URL exits 2 with a clear message, no stack trace', async () => {
    const inspectArgs = [
      'inspect',
      '--config',
      file,
      '--route',
      'GET/search',
      '--tenant',
      't',
      '--user',
      'u',
    ];
    const runs = await Promise.all([
      sluice(['stats', '--url', 'redis://127.0.0.1:1']),
      sluice([...inspectArgs, '--url', 'redis://:s3cret@127.0.0.1:1', '--json']),
      sluice(['reset', ...inspectArgs.slice(1), '--yes'], { REDIS_URL: 'redis://127.0.0.1:1' }),
      sluice(['stats', '--url', 'not a url']),
    ]);
    for (const run of runs) {
      assert.equal(run.code, 2, run.stderr);
      noStack(run);
    }
    assert.match(
      runs[0]?.stderr ?? '',
      /^sluice stats: cannot reach Redis at redis:\/\/127\.0\.0\.1:1: connect ECONNREFUSED/,
    );
    assert.match(runs[0]?.stderr ?? '', /--url or REDIS_URL/);
    assert.doesNotMatch(runs[1]?.stderr ?? '', /s3cret/, 'the password is not printed');
    assert.equal(json(runs[1] as Run).ok, false);
    assert.match(runs[2]?.stderr ?? '', /cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
    assert.match(runs[3]?.stderr ?? '', /is not a redis:\/\/, rediss:\/\/ or unix:\/\/ URL/);
  });

  it('--help on every command, help <command>, the exit statuses in sluice --help', async () => {
    const commands = ['demo', 'bench', 'inspect', 'reset', 'stats', 'check-config', 'serve'];
    const runs = await Promise.all([
      sluice(['--help']),
      ...commands.map((c) => sluice([c, '--help'])),
      ...commands.map((c) => sluice(['help', c])),
    ]);
    for (const run of runs) assert.equal(run.code, 0, run.stderr);
    assert.match(runs[0]?.stdout ?? '', /^Usage: sluice <command>/);
    assert.match(
      runs[0]?.stdout ?? '',
      /Exit status:\n {2}0 {2}ok\n {2}1 {2}a check failed.*\n.*\n {2}2 {2}a usage error/,
    );
    commands.forEach((command, i) => {
      assert.match(runs[1 + i]?.stdout ?? '', new RegExp(`^Usage: sluice ${command}`));
      assert.equal(runs[1 + commands.length + i]?.stdout, runs[1 + i]?.stdout);
    });
  });
});

describe('sluice: control characters from a user', () => {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point.
  const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
  /** Nothing printed holds a control character but the line breaks of the output itself. */
  const noRawControls = (run: Run, what: string) => {
    assert.doesNotMatch(run.stdout, RAW_CONTROL, `${what}: stdout`);
    assert.doesNotMatch(run.stderr, RAW_CONTROL, `${what}: stderr`);
  };
  // ESC (a sequence that clears the screen), CR, NEL (a C1 control), DEL; BEL and LF.
  const tenant = 'a\x1b[2Jb\r\u0085\x7f';
  const shownTenant = 'a\\x1b[2Jb\\r\\u0085\\x7f';
  const user = 'u\nx\x07';
  const shownUser = 'u\\nx\\x07';
  /** Every run, at once. */
  const allOf = async <K extends string>(runs: Record<K, Promise<Run>>) =>
    Object.fromEntries(
      await Promise.all(Object.entries<Promise<Run>>(runs).map(async ([k, r]) => [k, await r])),
    ) as Record<K, Run>;

  it('are printed escaped in text: ids, names, paths, URLs, option values; JSON keeps them exact', async () => {
    const evil = join(dir, 'evil\x1b[31m.json');
    const shownEvil = join(dir, 'evil\\x1b[31m.json');
    writeFileSync(
      evil,
      JSON.stringify({
        ...POLICY_FILE,
        tenants: { ...POLICY_FILE.tenants, [tenant]: { plan: 'pro' } },
      }),
    );
    const scope = ['--config', evil, '--route', 'POST/orders', '--tenant', tenant, '--user', user];
    // A route with a limit per user for the tenant's plan: reset takes --user there only.
    const resetScope = scope.map((a) => (a === 'POST/orders' ? 'GET/search' : a));
    const runs = await allOf({
      inspect: sluice(['inspect', ...scope, ...url()]),
      inspectJson: sluice(['inspect', ...scope, '--json', ...url()]),
      reset: sluice(['reset', ...resetScope, '--yes', ...url()]),
      resetJson: sluice(['reset', ...resetScope, '--yes', '--json', ...url()]),
      noPolicy: sluice(['reset', ...resetScope, '--policy', 'n\x1bo', '--yes', ...url()]),
      noRoute: sluice([
        'inspect',
        ...scope.slice(0, 2),
        '--route',
        'GET/n\x1b[Ao',
        '--tenant',
        't',
        ...url(),
      ]),
      check: sluice(['check-config', evil]),
      missing: sluice(['check-config', join(dir, 'gone\r\x9b.json')]),
      missingJson: sluice(['check-config', join(dir, 'gone\r\x9b.json'), '--json']),
      namespace: sluice(['stats', '--namespace', 'n\x1b]0;owned\x07', ...url()]),
      badUrl: sluice(['stats', '--url', 'redis://127.0.0.1:1/\x1b[2J']),
      cost: sluice(['inspect', ...scope, '--cost', '1\x1b[8m', ...url()]),
      option: sluice(['stats', '--bo\x1bgus']),
      help: sluice(['help', 'n\x1bope']),
    });
    for (const [what, run] of Object.entries(runs)) noRawControls(run, what);

    const { inspect, inspectJson, reset, resetJson } = runs;
    assert.equal(inspect.code, 0, inspect.stderr);
    assert.ok(
      inspect.stdout.startsWith(
        `POST/orders for tenant "${shownTenant}", user "${shownUser}": plan "pro"`,
      ),
      inspect.stdout,
    );
    assert.equal(inspectJson.code, 0, inspectJson.stderr);
    assert.deepEqual([json(inspectJson).tenant, json(inspectJson).user], [tenant, user]);
    assert.deepEqual(json(inspectJson).limits[0].scope, { tenant, route: 'POST/orders' });
    assert.equal(reset.code, 0, reset.stderr);
    assert.ok(reset.stdout.includes(`tenant "${shownTenant}", user "${shownUser}"`), reset.stdout);
    assert.equal(resetJson.code, 0, resetJson.stderr);
    assert.equal(json(resetJson).tenant, tenant);

    assert.equal(runs.noPolicy.code, 1);
    assert.ok(
      runs.noPolicy.stderr.includes(
        `no limit named "n\\x1bo" on GET/search for tenant "${shownTenant}"`,
      ),
    );
    assert.equal(runs.noRoute.code, 1);
    assert.ok(runs.noRoute.stderr.includes('no route "GET/n\\x1b[Ao"'), runs.noRoute.stderr);
    assert.equal(runs.check.code, 0, runs.check.stderr);
    assert.ok(runs.check.stdout.startsWith(`${shownEvil}: valid`), runs.check.stdout);
    assert.ok(runs.check.stdout.includes(`, ${shownTenant} (plan pro)`), runs.check.stdout);
    assert.equal(runs.missing.code, 2);
    assert.ok(runs.missing.stderr.includes('cannot read '), runs.missing.stderr);
    assert.ok(runs.missing.stderr.includes('gone\\r\\u009b.json'), runs.missing.stderr);
    assert.ok(json(runs.missingJson).error.includes('gone\r\x9b.json'), 'JSON: the path as given');
    assert.equal(runs.namespace.code, 2);
    assert.ok(
      runs.namespace.stderr.includes('received string "n\\u001b]0;owned\\u0007"'),
      runs.namespace.stderr,
    );
    assert.equal(runs.badUrl.code, 2);
    assert.ok(runs.badUrl.stderr.includes('redis://127.0.0.1:1/\\x1b[2J'), runs.badUrl.stderr);
    assert.equal(runs.cost.code, 2);
    assert.ok(runs.cost.stderr.includes("argument '1\\x1b[8m' is invalid"), runs.cost.stderr);
    assert.equal(runs.option.code, 2);
    assert.ok(
      runs.option.stderr.startsWith("error: unknown option '--bo\\x1bgus'"),
      runs.option.stderr,
    );
    assert.equal(runs.help.code, 2);
    assert.ok(runs.help.stderr.startsWith("error: unknown command 'n\\x1bope'\n\nUsage: sluice"));
  });
});

describe('sluice: a Redis that refuses the setup or a command', () => {
  const password = 'open-sesame';
  const locked = useRedis(['--requirepass', password]);
  const at = (auth: string, path = '') => `redis://${auth}127.0.0.1:${locked.server.port}${path}`;
  const shown = (auth: string, path = '') => at(auth, path).replace(/[.]/g, '\\.');
  const scope = [
    '--config',
    file,
    '--route',
    'GET/search',
    '--tenant',
    't',
    '--user',
    'u',
  ] as const;
  before(async () => {
    // ACL users, each without one command that a sluice command runs.
    const admin = await locked.client({ url: at(`:${password}@`), fastPath: false });
    const users = { nopttl: ['-pttl'], noscript: ['-evalsha', '-eval'], noinfo: ['-info'] };
    for (const [user, rules] of Object.entries(users)) {
      await admin.client.sendCommand([
        'ACL',
        'SETUSER',
        user,
        'on',
        `>${user}-pw`,
        '~*',
        '+@all',
        ...rules,
      ]);
    }
  });
  /** Exit 2, one message with no stack trace, no "cannot reach", no raw reply, no password. */
  const refused = (run: Run, what: string) => {
    assert.equal(run.code, 2, `${what}: ${run.stderr}`);
    noStack(run);
    assert.doesNotMatch(run.stderr, /cannot reach|replied:|failed:/, what);
    assert.doesNotMatch(
      run.stderr + run.stdout,
      /open-sesame|b4d-pass|-pw@/,
      `${what}: a password`,
    );
  };

  it('at the start: no password, a wrong one, an unknown user, a database it lacks, TLS to a plain server', async () => {
    const [none, wrong, ghost, database, tls] = await Promise.all([
      sluice(['stats', '--url', at('')]),
      sluice(['inspect', ...scope, '--url', at(':b4d-pass@')]),
      sluice(['reset', ...scope, '--yes', '--url', at('ghost:b4d-pass@')]),
      sluice(['inspect', ...scope, '--json', '--url', at(`:${password}@`, '/99')]),
      sluice(['stats', '--url', at('').replace('redis:', 'rediss:')]),
    ]);
    for (const [what, run] of Object.entries({ none, wrong, ghost, database, tls })) {
      refused(run, what);
    }
    assert.match(
      none.stderr,
      new RegExp(
        `^sluice stats: Redis at ${shown('')} refused the connection: it requires a password \\(NOAUTH `,
      ),
    );
    assert.match(none.stderr, /\nGive it in --url or REDIS_URL: redis:\/\/:password@host:port/);
    assert.match(
      wrong.stderr,
      new RegExp(
        `^sluice inspect: Redis at ${shown(':\\*\\*\\*@')} refused the connection: wrong password or unknown user \\(WRONGPASS `,
      ),
    );
    assert.match(
      ghost.stderr,
      new RegExp(
        `^sluice reset: Redis at ${shown('ghost:\\*\\*\\*@')} refused the connection: wrong password or unknown user \\(WRONGPASS `,
      ),
    );
    assert.match(
      json(database).error,
      new RegExp(
        `^Redis at ${shown(':\\*\\*\\*@', '/99')} refused the connection: it has no database 99 \\(`,
      ),
    );
    assert.match(tls.stderr, /refused the connection: the TLS handshake failed \(/);
  });

  it('on a running connection: an ACL user that may not run PTTL, EVALSHA or INFO (inspect, reset, stats)', async () => {
    const runs = await Promise.all([
      sluice(['inspect', ...scope, '--url', at('nopttl:nopttl-pw@')]),
      sluice(['reset', ...scope, '--yes', '--url', at('nopttl:nopttl-pw@')]),
      sluice(['inspect', ...scope, '--url', at('noscript:noscript-pw@')]),
      sluice(['reset', ...scope, '--yes', '--json', '--url', at('noscript:noscript-pw@')]),
      sluice(['stats', '--url', at('noinfo:noinfo-pw@')]),
      sluice(['stats', '--json', '--url', at('noinfo:noinfo-pw@')]),
    ]);
    const expected: [string, string, string][] = [
      ['inspect', 'nopttl', 'PTTL'],
      ['reset', 'nopttl', 'PTTL'],
      ['inspect', 'noscript', 'EVALSHA'],
      ['reset', 'noscript', 'EVALSHA'],
      ['stats', 'noinfo', 'INFO'],
      ['stats', 'noinfo', 'INFO'],
    ];
    runs.forEach((run, i) => {
      const [command, user, denied] = expected[i] as [string, string, string];
      refused(run, `${command} as ${user}`);
      assert.match(
        run.stderr,
        new RegExp(
          `^sluice ${command}: Redis at ${shown(`${user}:\\*\\*\\*@`)} refused a command: the user may not run ${denied} \\(NOPERM `,
          'm',
        ),
        run.stderr,
      );
    });
    assert.match(json(runs[3] as Run).error, /refused a command: the user may not run EVALSHA/);
    assert.match(json(runs[5] as Run).error, /refused a command: the user may not run INFO/);
  });
});
