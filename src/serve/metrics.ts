/**
 * The service's metrics, in the Prometheus text format (`GET /metrics`), with no client
 * library: counters keyed by their labels, one gauge per state, one latency histogram.
 * Label values are bounded by the configuration: a configured domain (others share one
 * value), a rule's key (overrides share one value); under a rule's `detailed_metric` each
 * runtime value is put in its key, as the reference does, for the first
 * {@link MAX_DETAILED_KEYS} distinct ones (later ones are counted under the rule's key).
 */
import type { DescriptorOutcome } from './decide.js';

const BUCKETS_MS = [0.5, 1, 2, 5, 10, 20, 50, 100, 250, 1000];
/** Distinct runtime keys `detailed_metric` rules put in labels, per process; then the rule's key. */
export const MAX_DETAILED_KEYS = 1000;

/** `GET /metrics`'s families; see docs/serve.md. */
export class ServeMetrics {
  /** By result: the row's labels and its count (a call counts without building a string). */
  readonly #requests = new Map<string, Row>();
  /**
   * By domain, then key, then outcome (nested, so that counting a descriptor looks its row up
   * without building its label text; the text is built once, when the row is new).
   */
  readonly #descriptors = new Map<string, Map<string, Map<string, Row>>>();
  /** Every descriptor row, in the order they were first counted (the exposition's order). */
  readonly #descriptorRows: Row[] = [];
  readonly #reloads = new Map<string, number>();
  readonly #detailed = new Set<string>();
  readonly #buckets = BUCKETS_MS.map(() => 0);
  #count = 0;
  #sumMs = 0;
  /** Calls being decided now. */
  inFlight = 0;
  /** 1 while Redis answers, else 0. */
  redisUp = 0;
  /** 1 once a configuration is loaded, else 0. */
  configLoaded = 0;
  /** 1 while the files on disk do not load (the last good configuration serving), else 0. */
  configError = 0;

  /** One call answered: `ok`, `over_limit`, or the gRPC error it got. */
  request(result: string, ms: number): void {
    let row = this.#requests.get(result);
    if (row === undefined) {
      row = { labels: `result="${result}"`, value: 0 };
      this.#requests.set(result, row);
    }
    row.value++;
    this.#count++;
    this.#sumMs += ms;
    // The buckets are cumulative: every bound from the first one ms fits under.
    for (let i = BUCKETS_MS.length - 1; i >= 0 && ms <= (BUCKETS_MS[i] as number); i--) {
      this.#buckets[i] = (this.#buckets[i] as number) + 1;
    }
  }

  /** One descriptor decided; `detail`: the runtime key of a `detailed_metric` rule. */
  descriptor(domain: string, key: string, outcome: DescriptorOutcome, detail?: string): void {
    if (detail !== undefined && !this.#detailed.has(detail)) {
      if (this.#detailed.size < MAX_DETAILED_KEYS) this.#detailed.add(detail);
    }
    if (detail !== undefined && this.#detailed.has(detail)) key = detail;
    let keys = this.#descriptors.get(domain);
    if (keys === undefined) {
      keys = new Map();
      this.#descriptors.set(domain, keys);
    }
    let outcomes = keys.get(key);
    if (outcomes === undefined) {
      outcomes = new Map();
      keys.set(key, outcomes);
    }
    let row = outcomes.get(outcome);
    if (row === undefined) {
      row = { labels: `domain="${esc(domain)}",key="${esc(key)}",outcome="${outcome}"`, value: 0 };
      outcomes.set(outcome, row);
      this.#descriptorRows.push(row);
    }
    row.value++;
  }

  reload(ok: boolean): void {
    add(this.#reloads, `result="${ok ? 'ok' : 'error'}"`);
  }

  /** The text format. */
  text(): string {
    const lines: string[] = [];
    const family = (name: string, type: string, help: string, rows: Iterable<Row>) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const { labels, value } of rows) lines.push(`${name}{${labels}} ${value}`);
    };
    const gauge = (name: string, help: string, value: number) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name} ${value}`);
    };
    family(
      'sluice_serve_requests_total',
      'counter',
      'ShouldRateLimit calls by result.',
      this.#requests.values(),
    );
    family(
      'sluice_serve_descriptors_total',
      'counter',
      'Descriptors decided, by domain, rule key and outcome.',
      this.#descriptorRows,
    );
    family(
      'sluice_serve_config_reloads_total',
      'counter',
      'Configuration loads by result.',
      [...this.#reloads].map(([labels, value]) => ({ labels, value })),
    );
    gauge(
      'sluice_serve_config_loaded',
      '1 once a valid configuration is serving.',
      this.configLoaded,
    );
    gauge(
      'sluice_serve_config_error',
      '1 while the files on disk do not load (the last good configuration serving).',
      this.configError,
    );
    gauge('sluice_serve_redis_up', '1 while Redis answers.', this.redisUp);
    gauge('sluice_serve_in_flight', 'Calls being decided now.', this.inFlight);
    lines.push(
      '# HELP sluice_serve_request_duration_ms ShouldRateLimit latency in ms, as the service saw it.',
      '# TYPE sluice_serve_request_duration_ms histogram',
    );
    BUCKETS_MS.forEach((le, i) => {
      lines.push(`sluice_serve_request_duration_ms_bucket{le="${le}"} ${this.#buckets[i]}`);
    });
    lines.push(
      `sluice_serve_request_duration_ms_bucket{le="+Inf"} ${this.#count}`,
      `sluice_serve_request_duration_ms_sum ${this.#sumMs}`,
      `sluice_serve_request_duration_ms_count ${this.#count}`,
    );
    return `${lines.join('\n')}\n`;
  }
}

/** One row of a counter family: its label text and its count. */
interface Row {
  readonly labels: string;
  value: number;
}

function add(map: Map<string, number>, key: string): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

/** A label value escaped as the text format wants it. */
function esc(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
