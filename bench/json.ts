/**
 * JSON text laid out as the repository's formatter (Biome) lays it out, so that generated
 * results pass `npm run lint`: objects expanded, arrays of scalars on one line when that
 * line fits in 100 columns.
 */
const LINE_WIDTH = 100;
const SCALAR = String.raw`(?:"(?:[^"\\\n]|\\.)*"|-?\d[\d.eE+-]*|true|false|null)`;
const SCALAR_ARRAY = new RegExp(String.raw`\[\n((?: *${SCALAR},?\n)+) *\]`, 'g');

export function formatJson(value: unknown): string {
  const text = JSON.stringify(value, null, 2);
  const collapsed = text.replace(SCALAR_ARRAY, (match, body: string, offset: number) => {
    const items = body
      .split('\n')
      .map((line) => line.trim().replace(/,$/, ''))
      .filter((line) => line !== '');
    const inline = `[${items.join(', ')}]`;
    const column = offset - (text.lastIndexOf('\n', offset) + 1);
    return column + inline.length + 1 <= LINE_WIDTH ? inline : match;
  });
  return `${collapsed}\n`;
}
