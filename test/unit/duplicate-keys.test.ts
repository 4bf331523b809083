/**
 * Keys repeated in one object of a policy file: found in the text (JSON.parse keeps the
 * last silently) with their path, and refused by the reading code with that path.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { InvalidInputError } from 'sluice';
import { loadPolicies, PolicyFileError, policyConfigFrom, readPolicyFile } from 'sluice/config';
import { duplicateKeys } from '../../src/config/duplicate-keys.js';

const found = (text: string) => {
  JSON.parse(text); // the scanner reads valid JSON only
  return duplicateKeys(text).map((d) => [d.path, d.count]);
};

describe('duplicate keys in a JSON text', () => {
  it('none in valid files, also with one key in sibling objects and in arrays', () => {
    assert.deepEqual(found('{}'), []);
    assert.deepEqual(found('[1, "a", {"a": 1}, {"a": 2}]'), []);
    assert.deepEqual(found('{"a": {"x": 1}, "b": {"x": 2}, "x": [{"x": 1}, {"x": 1}]}'), []);
    assert.deepEqual(found('"a"'), []);
    assert.deepEqual(found(' 12 '), []);
  });

  it('a key twice at the top, and its path', () => {
    assert.deepEqual(found('{"a": 1, "a": 2}'), [[['a'], 2]]);
    assert.deepEqual(found('{"routes": {"GET/a": 1, "GET/b": 2, "GET/a": 3}}'), [
      [['routes', 'GET/a'], 2],
    ]);
  });

  it('at any depth: nested objects and arrays of objects, with the array index in the path', () => {
    const text = `{
      "routes": { "GET/a": { "policy": [ {"algorithm": "gcra"}, {"limit": 1, "limit": 2} ] } },
      "plans": { "pro": { "x": {}, "y": { "z": 1, "z": 2, "z": 3 } } },
      "list": [[{"k": 1}], [{"k": 1, "k": 1}]]
    }`;
    assert.deepEqual(found(text), [
      [['routes', 'GET/a', 'policy', 1, 'limit'], 2],
      [['plans', 'pro', 'y', 'z'], 3],
      [['list', 1, 0, 'k'], 2],
    ]);
  });

  it('in a value that a later duplicate replaces, in the order of the text', () => {
    assert.deepEqual(found('{"a": {"x": 1, "x": 2}, "a": {"x": 3}}'), [
      [['a', 'x'], 2],
      [['a'], 2],
    ]);
  });

  it('strings with escaped quotes, backslashes and structural characters are skipped whole', () => {
    assert.deepEqual(found('{"a": "x\\", \\"a\\": {", "b": 1}'), []);
    assert.deepEqual(found('{"a\\"b": 1, "a\\"b": 2}'), [[['a"b'], 2]]);
    assert.deepEqual(found('{"a\\\\": 1, "b": "\\\\", "a\\\\": 2}'), [[['a\\'], 2]]);
    assert.deepEqual(found('{"s": "{[,:]}", "t": "}", "s": 0}'), [[['s'], 2]]);
  });

  it('keys compare after their escapes are decoded, as JSON.parse compares them', () => {
    assert.deepEqual(found('{"a": 1, "\\u0061": 2}'), [[['a'], 2]]);
    assert.deepEqual(found('{"é": 1, "\\u00e9": 2, "e": 3}'), [[['é'], 2]]);
  });

  it('"__proto__" keys are keys like any other', () => {
    assert.deepEqual(found('{"__proto__": 1, "__proto__": 2}'), [[['__proto__'], 2]]);
    assert.deepEqual(found('{"tenants": {"__proto__": {"plan": "a", "plan": "b"}}}'), [
      [['tenants', '__proto__', 'plan'], 2],
    ]);
    assert.deepEqual(found('{"constructor": 1, "toString": 2, "hasOwnProperty": 3}'), []);
  });
});

describe('reading a policy file with a repeated key', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-dup-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const fw = '{"algorithm": "fixed-window", "limit": 1, "windowMs": 1000}';

  it('is refused with a PolicyFileError naming the path of each repeated key', () => {
    const file = write(
      'dup.json',
      `{"routes": {"GET/a": ${fw}, "GET/b": {"policy": ${fw}, "cost": 1, "cost": 2}, "GET/a": ${fw}}}`,
    );
    // As JSON.parse reads it, the file is valid: the repeat would go unnoticed.
    assert.equal(policyConfigFrom(JSON.parse(readFileSync(file, 'utf8'))).routes.size, 2);
    assert.throws(
      () => readPolicyFile(file),
      (error: unknown) => {
        assert.ok(error instanceof PolicyFileError && error instanceof InvalidInputError);
        assert.deepEqual(
          error.issues.map((i) => [i.field, i.expected]),
          [
            ['routes["GET/b"].cost', 'a key that appears once in its object (it appears twice)'],
            ['routes["GET/a"]', 'a key that appears once in its object (it appears twice)'],
          ],
        );
        assert.equal(error.field, 'routes["GET/b"].cost');
        return true;
      },
    );
    assert.throws(() => loadPolicies(file), { field: 'routes["GET/b"].cost' });
  });

  it('three times says so', () => {
    const file = write(
      'three.json',
      `{"routes": {"GET/a": ${fw}, "GET/a": ${fw}, "GET/a": ${fw}}}`,
    );
    assert.throws(() => readPolicyFile(file), {
      field: 'routes["GET/a"]',
      expected: 'a key that appears once in its object (it appears 3 times)',
    });
  });

  it('a file that is not JSON is still the `config` error, never a PolicyFileError', () => {
    const file = write('broken.json', '{"routes": {"GET/a": 1, "GET/a": ');
    assert.throws(
      () => readPolicyFile(file),
      (error: unknown) =>
        error instanceof InvalidInputError &&
        !(error instanceof PolicyFileError) &&
        error.field === 'config' &&
        /a readable JSON file/.test(error.expected),
    );
  });

  it('a file without repeats reads as before', () => {
    const file = write('ok.json', `{"routes": {"GET/a": ${fw}, "GET/b": ${fw}}}`);
    assert.deepEqual([...loadPolicies(file).keys()], ['GET/a', 'GET/b']);
  });
});
