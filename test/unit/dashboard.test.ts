/**
 * dashboards/grafana-sluice.json: it parses, it has the panels an operator needs, and every
 * metric its PromQL names — with every label it matches or groups by, and every outcome value
 * it selects — exists in a registry that sluice filled (a MemoryStore-backed limiter, a guard
 * and a client event, through `prometheusMetrics`).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { fixedWindow, MemoryStore, RateLimiter } from 'sluice';
import { createGuard } from 'sluice/http';
import {
  DECISION_OUTCOMES,
  prometheusMetrics,
  REDIS_EVENTS,
  REQUEST_OUTCOMES,
} from 'sluice/prometheus';

interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly datasource?: unknown;
  readonly gridPos: { h: number; w: number; x: number; y: number };
  readonly targets?: { expr: string; refId: string }[];
  readonly panels?: Panel[];
}

const dashboard = JSON.parse(
  readFileSync(new URL('../../dashboards/grafana-sluice.json', import.meta.url), 'utf8'),
) as {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; query: unknown; definition?: string }[] };
};

const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
const queries = panels.flatMap((p) =>
  (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })),
);

/** Metric name → label names, from a registry that sluice filled. */
async function filledRegistry(): Promise<Map<string, Set<string>>> {
  const registry = new Registry();
  const metrics = prometheusMetrics({ registry });
  const limiter = new RateLimiter({ store: new MemoryStore(), metrics });
  const policy = fixedWindow({ name: 'orders', limit: 1, windowMs: 60_000 });
  const guard = createGuard<{ tenant?: string }>({
    limiter,
    policy,
    route: 'POST/orders',
    identify: (req) => req.tenant,
    metrics,
  });
  await guard({ tenant: 'acme' });
  await guard({ tenant: 'acme' });
  await guard({});
  metrics.redisEvent('reconnect');
  const names = new Map<string, Set<string>>();
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const value of metric.values as { metricName?: string; labels: object }[]) {
      const name = value.metricName ?? metric.name;
      const labels = names.get(name) ?? new Set<string>();
      for (const label of Object.keys(value.labels)) labels.add(label);
      names.set(name, labels);
    }
    if (!names.has(metric.name) && String(metric.type) !== 'histogram')
      names.set(metric.name, new Set());
  }
  return names;
}

/** Labels every scraped series has from its target. */
const TARGET_LABELS = new Set(['job', 'instance']);
const FUNCTIONS = new Set([
  'rate',
  'irate',
  'increase',
  'sum',
  'avg',
  'max',
  'min',
  'count',
  'histogram_quantile',
  'label_values',
  'clamp_min',
  'topk',
]);
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool']);
/** The values sluice gives each label, where the set is fixed. */
const VALUES: Record<string, Record<string, readonly string[]>> = {
  sluice_decisions_total: { outcome: DECISION_OUTCOMES },
  sluice_http_requests_total: { outcome: REQUEST_OUTCOMES, shadow: ['true', 'false'] },
  sluice_redis_events_total: { event: REDIS_EVENTS },
};

interface Parsed {
  /** Metric names, with the label matchers of each selector. */
  readonly selectors: { metric: string; matchers: { label: string; values: string[] }[] }[];
  /** Labels named in `by (…)` / `without (…)`. */
  readonly grouping: string[];
  /** Identifiers that are neither functions, keywords, nor in a selector. */
  readonly bare: string[];
}

/** A small PromQL reader: enough for the dashboard's queries, strict about the rest. */
function parse(expr: string): Parsed {
  const selectors: Parsed['selectors'] = [];
  const grouping: string[] = [];
  let rest = expr.replace(
    /([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}/g,
    (_, metric: string, body: string) => {
      const matchers = [
        ...body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"/g),
      ].map((m) => ({
        label: m[1] as string,
        values: m[2] === '=' || m[2] === '=~' ? (m[3] as string).split('|') : [],
      }));
      selectors.push({ metric, matchers });
      return ' ';
    },
  );
  rest = rest
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without)\s*\(([^)]*)\)/g, (_, _kw, labels: string) => {
      grouping.push(...labels.split(',').map((l) => l.trim()));
      return ' ';
    })
    .replace(/"[^"]*"/g, ' ');
  const bare: string[] = [];
  for (const m of rest.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = m[0];
    if (FUNCTIONS.has(word) || KEYWORDS.has(word)) continue;
    bare.push(word);
  }
  return { selectors, grouping, bare };
}

describe('Grafana dashboard', () => {
  it('parses, with unique panel ids, a title, a uid and the panels an operator needs', () => {
    assert.equal(typeof dashboard.uid, 'string');
    assert.ok(dashboard.title.includes('sluice'));
    const ids = panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
    for (const p of panels) {
      assert.ok(p.title && p.gridPos, `panel ${p.id} has a title and a position`);
      if (p.type !== 'row') assert.ok(p.datasource && (p.targets ?? []).length > 0, p.title);
    }
    const all = queries.map((q) => q.expr).join('\n');
    assert.match(all, /sum by \(outcome\) \(rate\(sluice_decisions_total/, 'decisions by outcome');
    assert.match(all, /sluice_http_requests_total\{[^}]*outcome="limited"/, '429 rate');
    assert.match(
      all,
      /sum by \(policy\) \(rate\(sluice_decisions_total\{[^}]*outcome="limited"/,
      'refusals by policy: which limit binds',
    );
    assert.match(
      all,
      /histogram_quantile\(0\.99, sum by \(le, policy\) \(rate\(sluice_decision_duration_seconds_bucket/,
      'p99',
    );
    assert.match(all, /sluice_in_flight/, 'in flight');
    assert.match(all, /sluice_redis_events_total/, 'Redis events');
  });

  it('every metric, label and outcome value its queries use exists in a registry sluice filled', async () => {
    const registry = await filledRegistry();
    const sources = [
      ...queries,
      ...dashboard.templating.list
        .filter((v) => typeof v.definition === 'string')
        .map((v) => ({ panel: `variable ${v.name}`, expr: v.definition as string })),
    ];
    assert.ok(sources.length >= 10);
    for (const { panel, expr } of sources) {
      const { selectors, grouping, bare } = parse(expr);
      const where = `${panel}: ${expr}`;
      for (const name of bare) {
        // label_values(metric, label): a metric, then a label of it.
        assert.ok(
          registry.has(name) || TARGET_LABELS.has(name),
          `unknown name "${name}" in ${where}`,
        );
      }
      assert.ok(selectors.length + bare.length > 0, `no metric in ${where}`);
      const labels = new Set<string>(TARGET_LABELS);
      for (const { metric, matchers } of selectors) {
        const known = registry.get(metric);
        assert.ok(known, `metric ${metric} is not in the registry (${where})`);
        for (const label of known) labels.add(label);
        for (const { label, values } of matchers) {
          assert.ok(
            known.has(label) || TARGET_LABELS.has(label),
            `${metric} has no label ${label} (${where})`,
          );
          const allowed = VALUES[metric]?.[label] ?? [];
          if (allowed.length === 0) continue;
          for (const value of values) {
            assert.ok(
              allowed.includes(value),
              `${metric}{${label}="${value}"} never exists (${where})`,
            );
          }
        }
      }
      for (const label of grouping)
        assert.ok(labels.has(label), `no label ${label} to group by (${where})`);
    }
  });

  it('the reader sees through the queries (a wrong name fails)', () => {
    assert.deepEqual(
      parse('sum by (outcome) (rate(sluice_decisons_total{job=~"$job"}[5m]))').selectors,
      [{ metric: 'sluice_decisons_total', matchers: [{ label: 'job', values: ['$job'] }] }],
    );
    assert.deepEqual(parse('histogram_quantile(0.99, rate(foo_bucket[1m]))').bare, ['foo_bucket']);
  });
});
