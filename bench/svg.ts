/**
 * A hand-written SVG: two horizontal bar charts side by side, decisions/s and p99 latency
 * per contender, for one scenario and concurrency. No library.
 */

export interface ChartRow {
  readonly name: string;
  readonly decisionsPerSec: number;
  readonly p99Us: number;
}

const WIDTH = 960;
const PANEL_WIDTH = 460;
const LABEL_WIDTH = 150;
const BAR_MAX = 220;
const ROW_HEIGHT = 30;
const TOP = 70;

function escapeXml(text: string): string {
  return text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

function color(name: string): string {
  if (name === 'sluice') return '#2563eb';
  if (name.startsWith('sluice-')) return '#93c5fd';
  if (name === 'floor') return '#9ca3af';
  return '#f59e0b';
}

function panel(
  x: number,
  title: string,
  rows: readonly ChartRow[],
  value: (row: ChartRow) => number,
  format: (n: number) => string,
): string {
  const max = Math.max(...rows.map(value), 1);
  const parts = [
    `<text x="${x}" y="${TOP - 16}" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
  ];
  rows.forEach((row, i) => {
    const y = TOP + i * ROW_HEIGHT;
    const width = Math.max(1, Math.round((value(row) / max) * BAR_MAX));
    const barX = x + LABEL_WIDTH;
    parts.push(
      `<text x="${barX - 8}" y="${y + 15}" font-size="13" text-anchor="end">${escapeXml(row.name)}</text>`,
      `<rect x="${barX}" y="${y}" width="${width}" height="${ROW_HEIGHT - 8}" fill="${color(row.name)}"/>`,
      `<text x="${barX + width + 6}" y="${y + 15}" font-size="12">${escapeXml(format(value(row)))}</text>`,
    );
  });
  return parts.join('\n  ');
}

/** The chart for `rows` (in display order), titled with the scenario. */
export function renderChart(subtitle: string, rows: readonly ChartRow[]): string {
  const height = TOP + rows.length * ROW_HEIGHT + 30;
  const number = (n: number) => Math.round(n).toLocaleString('en-US');
  const title = `sluice benchmark — ${subtitle}`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" font-family="system-ui, -apple-system, Segoe UI, sans-serif">
  <title>${escapeXml(`${title}: decisions/s and p99 latency per contender`)}</title>
  <rect width="100%" height="100%" fill="#ffffff"/>
  <text x="20" y="26" font-size="17" font-weight="bold">${escapeXml(title)}</text>
  ${panel(20, 'decisions/s (higher is better)', rows, (r) => r.decisionsPerSec, number)}
  ${panel(20 + PANEL_WIDTH + 20, 'p99 latency, µs (lower is better)', rows, (r) => r.p99Us, number)}
  <text x="20" y="${height - 10}" font-size="11" fill="#6b7280">median across rounds; floor = raw pipelined RESP client running sluice's script (a measuring stick, not a limiter)</text>
</svg>
`;
}
