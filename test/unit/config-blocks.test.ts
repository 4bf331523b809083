/**
 * Policy files accept `blockMs` and `escalate` on every rate policy, as the builders do: the
 * policy built has the block (its identity, its horizon), a bad value is a problem at its path
 * in the file, a concurrency policy refuses them, and the CLI's words say the block.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedWindow } from 'sluice';
import { checkPolicies, describePolicy, policyConfigFrom } from 'sluice/config';
import { policyBlock } from '../../src/config/describe.js';

const login = {
  algorithm: 'fixed-window',
  limit: 5,
  windowMs: 900_000,
  blockMs: 60_000,
  escalate: { factor: 2, maxMs: 3_600_000, withinMs: 3_600_000 },
};

const fieldsOf = (doc: unknown) => checkPolicies(doc).map((issue) => issue.field);

describe('policy files: blockMs and escalate', () => {
  it('build the policy the builder builds, with its block', () => {
    const config = policyConfigFrom({ policies: { login }, routes: { 'POST/login': 'login' } });
    const policy = config.policies.get('login');
    const { algorithm: _, ...options } = login;
    const built = fixedWindow({ ...options, name: 'login' });
    assert.equal(policy?.id, built.id, 'the same identity as the builder gives');
    assert.deepEqual(policy?.block, built.block);
    assert.ok((policy?.horizonMs ?? 0) >= 3_600_000 + 3_600_000, 'the horizon includes the block');
    assert.deepEqual(policyBlock(policy as never), {
      blockMs: 60_000,
      escalate: { factor: 2, maxMs: 3_600_000, withinMs: 3_600_000 },
    });
    assert.match(describePolicy(policy as never), /blocks of 60 s \(×2 within 1 h, up to 1 h\)/);
  });

  for (const algorithm of [
    { algorithm: 'sliding-window-log', limit: 3, windowMs: 1000 },
    { algorithm: 'sliding-window-counter', limit: 3, windowMs: 1000 },
    { algorithm: 'token-bucket', capacity: 3, refillIntervalMs: 1000 },
    { algorithm: 'gcra', limit: 3, periodMs: 1000 },
  ]) {
    it(`${algorithm.algorithm}: takes blockMs`, () => {
      assert.deepEqual(fieldsOf({ routes: { 'POST/a': { ...algorithm, blockMs: 500 } } }), []);
      const config = policyConfigFrom({ routes: { 'POST/a': { ...algorithm, blockMs: 500 } } });
      const policy = config.defaults.get('POST/a')?.[0]?.policy;
      assert.equal(policy?.block?.blockMs, 500);
      assert.match(describePolicy(policy as never), /blocks of 500 ms$/);
    });
  }

  it('name each bad value by its path in the file', () => {
    const at = (extra: object) =>
      fieldsOf({ policies: { login: { ...login, ...extra } }, routes: { 'POST/login': 'login' } });
    assert.deepEqual(at({ blockMs: 0 }), ['policies.login.blockMs']);
    assert.deepEqual(at({ blockMs: 'x' }), ['policies.login.blockMs']);
    assert.deepEqual(at({ blockMs: 1e300 }), ['policies.login.blockMs']);
    assert.deepEqual(at({ escalate: { ...login.escalate, factor: 1 } }), [
      'policies.login.escalate.factor',
    ]);
    assert.deepEqual(at({ escalate: { ...login.escalate, maxMs: 1000 } }), [
      'policies.login.escalate.maxMs',
    ]);
    assert.deepEqual(at({ escalate: { factor: 2, maxMs: 3_600_000 } }), [
      'policies.login.escalate.withinMs',
    ]);
    assert.deepEqual(at({ escalate: { ...login.escalate, extra: 1 } }), [
      'policies.login.escalate.extra',
    ]);
    assert.deepEqual(at({ escalate: 'twice' }), ['policies.login.escalate']);
    assert.deepEqual(at({ blockMs: undefined }), ['policies.login.blockMs']);
  });

  it('a concurrency policy has no block', () => {
    const fields = fieldsOf({
      routes: { 'POST/a': { algorithm: 'concurrency', limit: 2, leaseMs: 1000, blockMs: 10 } },
    });
    assert.equal(fields.length, 1);
    assert.equal(fields[0], 'routes["POST/a"].blockMs');
  });
});
