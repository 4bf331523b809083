/**
 * A memo of a pure function of a string, bounded in entries: once it holds `max`, it is
 * emptied and fills again (no eviction order to keep: the hot inputs come back first).
 * For the key digests (see `key.ts`), where a SHA-256 costs about ten Map lookups.
 */
export function boundedMemo(fn: (text: string) => string, max: number): (text: string) => string {
  const memo = new Map<string, string>();
  return (text) => {
    let value = memo.get(text);
    if (value === undefined) {
      value = fn(text);
      if (memo.size >= max) memo.clear();
      memo.set(text, value);
    }
    return value;
  };
}
