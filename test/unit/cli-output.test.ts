/**
 * The CLI's one escaping helper: every control character shown in a visible, unambiguous
 * form, other text untouched; and JSON whose parsed values are exactly those given, with no
 * control character raw in its text.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { escapeControls, jsonText } from '../../src/cli/output.js';

describe('escapeControls', () => {
  it('escapes C0 controls, DEL and C1 controls, each in its own form', () => {
    assert.equal(escapeControls('a\x1b[2Jb'), 'a\\x1b[2Jb');
    assert.equal(escapeControls('\r\n\t'), '\\r\\n\\t');
    assert.equal(
      escapeControls('\x00\x07\x08\x0b\x0c\x1f\x7f'),
      '\\x00\\x07\\x08\\x0b\\x0c\\x1f\\x7f',
    );
    assert.equal(escapeControls('\u0080\u0085\u009b\u009f'), '\\u0080\\u0085\\u009b\\u009f');
  });

  it('keeps every other character, and escaping twice changes nothing more', () => {
    const text = 'POST/orders for tenant "acmé" — 5 per 60 s, user’s 🚦 \\x1b \u00a0\u2028';
    assert.equal(escapeControls(text), text);
    const once = escapeControls('a\x1bb\u0085');
    assert.equal(escapeControls(once), once);
  });
});

describe('jsonText', () => {
  it('is JSON.stringify, with DEL and C1 controls escaped too: parsed back, the values are exact', () => {
    const value = { tenant: 'a\x1b[2Jb\r\n\u0085\x7f', plain: 'acme', n: 1 };
    const text = jsonText(value, null, 2);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point.
    assert.doesNotMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    assert.deepEqual(JSON.parse(text), value);
    assert.equal(jsonText({ plain: 'acme' }, null, 2), JSON.stringify({ plain: 'acme' }, null, 2));
    const replacer = (_k: string, v: unknown) => (v === Number.POSITIVE_INFINITY ? null : v);
    assert.equal(jsonText({ x: Infinity }, replacer), '{"x":null}');
  });
});
