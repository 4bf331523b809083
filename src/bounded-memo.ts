/**
 * Memos of pure functions, bounded in entries: once one holds `max`, it is emptied and fills
 * again (no eviction order to keep: the hot inputs come back first). For the key digests
 * (see `key.ts`), where a SHA-256 costs about ten Map lookups. They are keyed by the inputs
 * themselves, not by a text built from them, so that a hit allocates nothing.
 */

/** `fn`, memoized on its argument. */
export function boundedMemo<A, V>(fn: (a: A) => V, max: number): (a: A) => V {
  const memo = new Map<A, V>();
  return (a) => {
    let value = memo.get(a);
    if (value === undefined) {
      value = fn(a);
      if (memo.size >= max) memo.clear();
      memo.set(a, value);
    }
    return value;
  };
}

/** `fn`, memoized on its two arguments (at most `max` pairs in all). */
export function boundedPairMemo<A, B, V>(fn: (a: A, b: B) => V, max: number): (a: A, b: B) => V {
  const memo = new Map<A, Map<B, V>>();
  let size = 0;
  return (a, b) => {
    let inner = memo.get(a);
    let value = inner?.get(b);
    if (value === undefined) {
      value = fn(a, b);
      if (size >= max) {
        memo.clear();
        size = 0;
        inner = undefined;
      }
      if (inner === undefined) {
        inner = new Map();
        memo.set(a, inner);
      }
      inner.set(b, value);
      size++;
    }
    return value;
  };
}
