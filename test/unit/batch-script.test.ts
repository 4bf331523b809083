import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BATCH_ALGORITHMS, batchBody, batchId, batchScript } from '../../src/algorithms/batch.js';
import { fixedWindowScript } from '../../src/algorithms/fixed-window.js';
import { scriptFromSource } from '../../src/algorithms/script.js';

describe('batch script assembly', () => {
  it('rewrites KEYS[1] and ARGV[n] of each algorithm to the item’s key and arguments', () => {
    const body = batchBody(fixedWindowScript);
    assert.match(body, /local key = KEYS\[i\]/);
    assert.match(body, /tonumber\(ARGV\[base \+ 1\]\)/);
    assert.doesNotMatch(body.replace(/--.*$/gm, ''), /KEYS\[1\]|ARGV\[\d/);
  });

  it('refuses an algorithm that reads other keys or ARGV as a whole', () => {
    const mode = '-- mode:begin\nlocal dry, probe = false, false\n-- mode:end\n';
    for (const source of ['return #ARGV', 'return KEYS[2]', 'local k = KEYS', 'return ARGV[n]']) {
      assert.throws(
        () => batchBody(scriptFromSource('bad', mode + source, 1)),
        /batchable script/,
        source,
      );
    }
    assert.throws(
      () => batchBody(scriptFromSource('bad', 'return KEYS[1]', 1)),
      /no mode:begin/,
      'an algorithm must let the batch set dry and probe',
    );
  });

  it('every algorithm has an id, and the batch SHA-1 is computed from the assembled text', () => {
    assert.equal(batchId(fixedWindowScript), 1);
    assert.equal(BATCH_ALGORITHMS.length, 6);
    BATCH_ALGORITHMS.forEach((script, i) => {
      assert.equal(batchId(script), i + 1);
      assert.ok(
        batchScript.source.includes(`ALGORITHMS[${i + 1}] = function(i, base, dry, probe, known)`),
        script.name,
      );
    });
    assert.match(batchScript.sha1, /^[0-9a-f]{40}$/);
  });
});
