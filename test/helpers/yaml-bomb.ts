/**
 * A YAML "billion laughs" document: 9 levels of 10 aliases each (10^9 expansions), for the
 * tests that a rule file past the alias bound is refused as an error of its file.
 */
export function aliasBomb(): string {
  const names = 'abcdefghi';
  return [
    'a: &a [x, x, x, x, x, x, x, x, x, x]',
    ...names
      .slice(1)
      .split('')
      .map((c, i) => `${c}: &${c} [${Array(10).fill(`*${names[i]}`).join(', ')}]`),
  ].join('\n');
}
