/**
 * The reference's rule files as `sluice serve` reads them: every problem a typed
 * `RuleFileError` worded `<file>: <path>: <reason>`, and the matching order (exact, wildcards
 * in config order, value-less key; the limit at the level of the last entry).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { MAX_PRICED_LOG_LIMIT } from '../../src/algorithms/sliding-window-log.js';
import { InvalidInputError } from '../../src/errors.js';
import { Policies } from '../../src/serve/policies.js';
import { RuleFileError } from '../../src/serve/rules/errors.js';
import { buildRuleSet } from '../../src/serve/rules/load.js';
import { parseRuleFile } from '../../src/serve/rules/parse.js';
import { RuleSet } from '../../src/serve/rules/tree.js';
import { aliasBomb } from '../helpers/yaml-bomb.js';

const set = (text: string, merge = false, more: string[] = []) =>
  new RuleSet(
    [text, ...more].map((t, i) => parseRuleFile(`f${i}.yaml`, t)),
    merge,
  );

function rejects(text: string, message: string, more: string[] = [], merge = false) {
  assert.throws(
    () => set(text, merge, more),
    (error: unknown) => {
      assert.ok(error instanceof RuleFileError);
      assert.ok(error instanceof InvalidInputError);
      assert.equal(error.message, message);
      return true;
    },
  );
}

describe('sluice serve rule files: errors', () => {
  it('names the file, the path and the reason', () => {
    rejects(
      'domain: d\nfoo: 1\n',
      'f0.yaml: foo: unknown key (expected one of domain, descriptors)',
    );
    rejects(
      'descriptors: []\n',
      'f0.yaml: domain: must be a non-empty string (the domain Envoy sends)',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: weekly, requests_per_unit: 1 }\n',
      'f0.yaml: descriptors[0].rate_limit.unit: must be one of second, minute, hour, day, week, month, year; received "weekly"',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - value: x\n',
      'f0.yaml: descriptors[0].descriptors[0].key: must be a non-empty string',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: -1 }\n',
      'f0.yaml: descriptors[0].rate_limit.requests_per_unit: must be an integer from 0 to 4294967295; received the number -1',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unlimited: true, unit: second }\n',
      'f0.yaml: descriptors[0].rate_limit.unit: must not be given with unlimited: true',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n    shadow_mode: "yes"\n',
      'f0.yaml: descriptors[0].shadow_mode: must be true or false; received a string',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1, name: n, replaces: [{ name: n }] }\n',
      'f0.yaml: descriptors[0].rate_limit.replaces[0].name: must not name its own rate limit',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n',
      'f0.yaml: descriptors[0].share_threshold: needs a wildcard value (one ending in *)',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1, algorithm: leaky }\n',
      'f0.yaml: descriptors[0].rate_limit.algorithm: must be one of fixed-window, token-bucket, gcra, sliding-window-log, sliding-window-counter',
    );
    rejects(
      'domain: d\ndescriptors:\n  - key: a\n  - key: a\n',
      "f0.yaml: descriptors[1].key: duplicate descriptor 'd.a'",
    );
    rejects(
      'domain: d\ndomain: e\n',
      'f0.yaml: (document): not valid YAML: Map keys must be unique',
    );
  });

  it('a domain in two files: an error, unless MERGE_DOMAIN_CONFIG', () => {
    const a =
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1 }\n';
    const b =
      'domain: d\ndescriptors:\n  - key: b\n    rate_limit: { unit: second, requests_per_unit: 2 }\n';
    rejects(
      a,
      "f1.yaml: domain: domain 'd' is in f0.yaml too (MERGE_DOMAIN_CONFIG=true merges them)",
      [b],
    );
    const merged = set(a, true, [b]);
    assert.equal(merged.match('d', [{ key: 'b', value: 'x' }])?.rule.limit.requestsPerUnit, 2);
    rejects(a, "f1.yaml: descriptors[0].key: duplicate descriptor 'd.a'", [a], true);
  });
});

describe('sluice serve rule files: matching', () => {
  const rules = set(`
domain: d
descriptors:
  - key: k
    value: "ab*"
    rate_limit: { unit: second, requests_per_unit: 1 }
  - key: k
    value: "a*"
    rate_limit: { unit: second, requests_per_unit: 2 }
  - key: k
    value: abc
    rate_limit: { unit: second, requests_per_unit: 3 }
  - key: k
    rate_limit: { unit: second, requests_per_unit: 4 }
  - key: outer
    descriptors:
      - key: inner
        value: "*"
        share_threshold: true
        rate_limit: { unit: second, requests_per_unit: 5 }
`);
  const rpu = (entries: [string, string][]) =>
    rules.match(
      'd',
      entries.map(([key, value]) => ({ key, value })),
    )?.rule.limit.requestsPerUnit;

  it('exact, then the first wildcard in config order, then the value-less key', () => {
    assert.equal(rpu([['k', 'abc']]), 3);
    assert.equal(rpu([['k', 'abd']]), 1);
    assert.equal(rpu([['k', 'ax']]), 2);
    assert.equal(rpu([['k', 'zz']]), 4);
  });

  it('the limit of the last entry’s level only; share_threshold counts under the wildcard', () => {
    assert.equal(rpu([['outer', 'o']]), undefined);
    assert.equal(
      rpu([
        ['outer', 'o'],
        ['inner', 'i1'],
      ]),
      5,
    );
    assert.equal(
      rpu([
        ['k', 'abc'],
        ['inner', 'x'],
      ]),
      undefined,
    );
    const m = rules.match('d', [
      { key: 'outer', value: 'o' },
      { key: 'inner', value: 'i1' },
    ]);
    assert.deepEqual(m?.counted, ['outer_o', 'inner_*']);
    assert.deepEqual(rules.match('d', [{ key: 'k', value: 'zz' }])?.counted, ['k_zz']);
    assert.equal(rules.match('other', [{ key: 'k', value: 'abc' }]), undefined);
  });
});

describe('sluice serve rule files: the examples of docs/serve.md load', () => {
  it('examples/serve/config/ratelimit.yaml and the ConfigMap of examples/serve/kubernetes.yaml', () => {
    const root = new URL('../../examples/serve/', import.meta.url);
    const file = readFileSync(new URL('config/ratelimit.yaml', root), 'utf8');
    const rules = new RuleSet([parseRuleFile('ratelimit.yaml', file)], false);
    assert.equal(rules.rules.length, 6);
    const m = rules.match('shop', [
      { key: 'api_key', value: 'k1' },
      { key: 'path', value: '/orders' },
    ]);
    assert.equal(m?.rule.limit.name, 'orders-per-key');
    const docs = parseAllDocuments(readFileSync(new URL('kubernetes.yaml', root), 'utf8'));
    const configMap = docs[0]?.toJS() as { data: Record<string, string> };
    for (const [name, text] of Object.entries(configMap.data)) parseRuleFile(name, text);
  });
});

describe('sluice serve rule files: limits sluice cannot decide', () => {
  it('are errors of the file, found at load (never at a request)', () => {
    const text =
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 20000, algorithm: sliding-window-log }\n';
    assert.throws(
      () => buildRuleSet({ files: [{ name: 'f.yaml', text }], digest: '' }, false, new Policies()),
      (error: unknown) => {
        assert.ok(error instanceof RuleFileError);
        assert.match(error.message, /^f\.yaml: descriptors\[0\]\.rate_limit: cannot be decided: /);
        return true;
      },
    );
  });

  it(`a sliding-window-log above ${MAX_PRICED_LOG_LIMIT} (its refused hits are charged): requests_per_unit and the bound`, () => {
    const file = (limit: number) =>
      `domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1 }\n  - key: b\n    rate_limit: { unit: minute, requests_per_unit: ${limit}, algorithm: sliding-window-log }\n`;
    const build = (limit: number) =>
      buildRuleSet(
        { files: [{ name: 'f.yaml', text: file(limit) }], digest: '' },
        false,
        new Policies(),
      );
    for (const limit of [MAX_PRICED_LOG_LIMIT + 1, 20_000]) {
      assert.throws(
        () => build(limit),
        (error: unknown) => {
          assert.ok(error instanceof RuleFileError);
          assert.equal(error.file, 'f.yaml');
          assert.equal(error.path, 'descriptors[1].rate_limit');
          assert.match(
            error.message,
            new RegExp(
              `^f\\.yaml: descriptors\\[1\\]\\.rate_limit: cannot be decided: requests_per_unit must be at most ${MAX_PRICED_LOG_LIMIT} with algorithm sliding-window-log .*; received number ${limit}$`,
            ),
          );
          return true;
        },
      );
    }
    assert.equal(build(MAX_PRICED_LOG_LIMIT).rules.length, 2);
  });
});

describe('sluice serve rule files: what the reference loads', () => {
  const anchored = (uses: number) =>
    `domain: d\ndescriptors:\n  - key: k0\n    rate_limit: &std { unit: minute, requests_per_unit: 10 }\n${Array.from(
      { length: uses },
      (_, i) => `  - key: k${i + 1}\n    rate_limit: *std\n`,
    ).join('')}`;

  it('a rate_limit anchored once and used on a thousand descriptors', () => {
    const rules = set(anchored(1000));
    assert.equal(rules.rules.length, 1001);
  });

  it('an alias expansion attack is still refused, as an error of its file', () => {
    const laughs = aliasBomb();
    assert.throws(
      () => parseRuleFile('bomb.yaml', `${laughs}\ndomain: d\n`),
      (error: unknown) =>
        error instanceof RuleFileError &&
        /^bomb\.yaml: \(document\): not valid YAML: .*alias/i.test(error.message),
    );
  });

  it('requests_per_unit 0 or none: loads (a deny-all rule, as the reference)', () => {
    const rules = set(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 0 }\n  - key: b\n    rate_limit: { unit: hour }\n',
    );
    assert.deepEqual(
      rules.rules.map((r) => r.limit.requestsPerUnit),
      [0, 0],
    );
  });

  it('every file that does not load is reported, each with its first error', () => {
    const texts = {
      digest: '',
      files: [
        { name: 'a.yaml', text: 'domain: a\nbogus: 1\n' },
        { name: 'b.yaml', text: 'domain: b\ndescriptors: []\n' },
        { name: 'c.yaml', text: 'domain: c\ndescriptors:\n  - rate_limt: 1\n' },
      ],
    };
    assert.throws(
      () => buildRuleSet(texts, false, new Policies()),
      (error: unknown) => {
        assert.ok(error instanceof RuleFileError);
        assert.equal(error.file, 'a.yaml');
        assert.deepEqual(error.message.split('\n'), [
          'a.yaml: bogus: unknown key (expected one of domain, descriptors)',
          'c.yaml: descriptors[0].rate_limt: unknown key (expected one of key, value, rate_limit, descriptors, shadow_mode, detailed_metric, quota_mode, share_threshold)',
        ]);
        return true;
      },
    );
  });
});
