/**
 * What a policy file's problems say: each message names the field's path and quotes the
 * value the file has there (a string as written, cut with its length when long), or says
 * that the field is missing — never zod's own words, a string's length alone, or
 * "undefined". Checked for every field of both formats, of plans, tenants and the top level.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkPolicies } from 'sluice/config';

const FW = { algorithm: 'fixed-window', limit: 1, windowMs: 1000 };
const TB = { algorithm: 'token-bucket', capacity: 5, refillIntervalMs: 1000 };
const GCRA = { algorithm: 'gcra', limit: 5, periodMs: 1000 };

const messages = (doc: unknown) => checkPolicies(doc).map((issue) => issue.message);

/** Words that mean the value was not shown, or that zod's default message leaked. */
const UNHELPFUL =
  /string of length|received undefined|Invalid input|Too small|Too big|Invalid option|expected (number|string|object|array|boolean)/;

/** `value` in place of `field` of `object` (deleted when undefined). */
function withField(object: Record<string, unknown>, field: string, value: unknown) {
  const copy = { ...object };
  if (value === undefined) delete copy[field];
  else copy[field] = value;
  return copy;
}

const BAD_VALUES: unknown[] = ['x', 'failopen', -1, 0, 1.5, 1e300, null, true, [], {}, undefined];

/** Documents with one bad field each, by where the field is. */
function* badDocuments(): Generator<[string, unknown]> {
  for (const policy of [FW, TB, GCRA]) {
    const fields = [...Object.keys(policy), 'refillTokens', 'burst', 'name', 'version', 'blockMs'];
    for (const field of fields) {
      for (const value of BAD_VALUES) {
        const bad = withField(policy, field, value);
        const at = `${policy.algorithm}.${field} = ${JSON.stringify(value)}`;
        yield [`format 1: ${at}`, { routes: { 'POST/a': bad } }];
        yield [`routes: ${at}`, { routes: { 'POST/a': { policy: bad } } }];
        yield [`policies: ${at}`, { policies: { p: bad }, routes: { 'POST/a': 'p' } }];
        yield [`plans: ${at}`, { routes: { 'POST/a': FW }, plans: { pro: { 'POST/a': bad } } }];
        yield [
          `tenants: ${at}`,
          { routes: { 'POST/a': FW }, tenants: { t: { routes: { 'POST/a': bad } } } },
        ];
      }
    }
  }
  for (const field of ['cost', 'failureMode', 'failOpenLimit', 'shadow', 'per']) {
    for (const value of BAD_VALUES) {
      const route = withField(
        { policy: FW, failureMode: 'fail-open', failOpenLimit: 5 },
        field,
        value,
      );
      yield [`route ${field} = ${JSON.stringify(value)}`, { routes: { 'POST/a': route } }];
      yield [
        `format 1 route ${field} = ${JSON.stringify(value)}`,
        { routes: { 'POST/a': withField({ ...FW, cost: 1 }, field, value) } },
      ];
      yield [
        `scoped limit ${field} = ${JSON.stringify(value)}`,
        { routes: { 'POST/a': [withField({ policy: FW, per: 'user' }, field, value)] } },
      ];
    }
  }
  // A whole value is never undefined in JSON.
  for (const value of BAD_VALUES.filter((v) => v !== undefined)) {
    const v = JSON.stringify(value);
    yield [`a route = ${v}`, { routes: { 'POST/a': value } }];
    yield [`a list item = ${v}`, { routes: { 'POST/a': [FW, value] } }];
    yield [`a policy = ${v}`, { policies: { p: value }, routes: { 'POST/a': 'p' } }];
    yield [`a plan = ${v}`, { routes: { 'POST/a': FW }, plans: { pro: value } }];
    yield [`a tenant = ${v}`, { routes: { 'POST/a': FW }, tenants: { t: value } }];
    yield [
      `a tenant's plan = ${v}`,
      { routes: { 'POST/a': FW }, plans: { pro: {} }, tenants: { t: { plan: value } } },
    ];
    yield [
      `a tenant's routes = ${v}`,
      { routes: { 'POST/a': FW }, tenants: { t: { routes: value } } },
    ];
    yield [
      `defaultPlan = ${v}`,
      { routes: { 'POST/a': FW }, plans: { pro: {} }, defaultPlan: value },
    ];
    for (const section of ['routes', 'policies', 'plans', 'tenants']) {
      yield [`${section} = ${v}`, { routes: { 'POST/a': FW }, [section]: value }];
    }
    yield [`the document = ${v}`, value];
  }
}

describe('policy file messages', () => {
  it('quote the offending value, or say the field is missing, for every field', () => {
    let checked = 0;
    for (const [what, doc] of badDocuments()) {
      for (const message of messages(doc)) {
        checked++;
        assert.match(message, /; received /, `${what}: ${message}`);
        assert.doesNotMatch(message, UNHELPFUL, `${what}: ${message}`);
      }
    }
    assert.ok(checked > 500, `${checked} messages`);
  });

  it('say what each value was', () => {
    const long = `${'x'.repeat(70)}\u001b[2J`;
    const cases: [unknown, string][] = [
      [
        { routes: { 'POST/a': { ...FW, failureMode: 'failopen' } } },
        'routes["POST/a"].failureMode must be "fail-closed" or "fail-open"; received string "failopen"',
      ],
      [
        { routes: { 'POST/a': { policy: FW, failureMode: long } } },
        `routes["POST/a"].failureMode must be "fail-closed" or "fail-open"; received string "${'x'.repeat(60)}…" (74 characters)`,
      ],
      [
        { routes: { 'POST/a': { ...FW, version: -1 } } },
        'routes["POST/a"].version must be a non-negative safe integer or 1–64 characters of [A-Za-z0-9._-]; received number -1',
      ],
      [
        { routes: { 'POST/a': { algorithm: 'fixed-window', windowMs: 1000 } } },
        'routes["POST/a"].limit must be a positive integer; received nothing (the field is missing)',
      ],
      [
        { routes: { 'POST/a': { policy: FW, failureMode: 'fail-open' } } },
        'routes["POST/a"].failOpenLimit must be a positive integer with "fail-open"; received nothing (the field is missing)',
      ],
      [
        {
          routes: {
            'POST/a': { policy: { algorithm: 'concurrency', limit: 2, leaseMs: 1000 }, cost: 2 },
          },
        },
        'routes["POST/a"].cost must be 1 on a route with a concurrency limit; received number 2',
      ],
      [
        { routes: { 'POST/a': { per: 'user' } } },
        'routes["POST/a"].policy must be the policy that "per" applies to; received nothing (the field is missing)',
      ],
      [
        { policies: { p: {} }, routes: { 'POST/a': 'p' } },
        'policies.p.algorithm must be one of "fixed-window", "sliding-window-log", "sliding-window-counter", "token-bucket", "gcra", "concurrency"; received nothing (the field is missing)',
      ],
      [
        { policies: { p: 5 }, routes: { 'POST/a': 'p' } },
        'policies.p must be an inline policy: an object { "algorithm", … }; received number 5',
      ],
      [
        { routes: { 'POST/a': FW }, tenants: { t: 'pro' } },
        'tenants.t must be an object { "plan"?, "routes"? }; received string "pro"',
      ],
    ];
    for (const [doc, expected] of cases) assert.deepEqual(messages(doc), [expected]);
  });
});
