/**
 * Latency samples in a preallocated Float64Array (grown by doubling, never per sample), and
 * exact percentiles by sorting once at the end.
 */
export class LatencyRecorder {
  #samples: Float64Array;
  #count = 0;

  constructor(initialCapacity = 1 << 20) {
    this.#samples = new Float64Array(initialCapacity);
  }

  get count(): number {
    return this.#count;
  }

  /** Records one latency in milliseconds (a `performance.now()` difference). */
  record(ms: number): void {
    if (this.#count === this.#samples.length) {
      const grown = new Float64Array(this.#samples.length * 2);
      grown.set(this.#samples);
      this.#samples = grown;
    }
    this.#samples[this.#count++] = ms;
  }

  /** Percentiles (0 < q ≤ 1) in microseconds, nearest-rank; 0 when nothing was recorded. */
  percentilesUs(quantiles: readonly number[]): number[] {
    const sorted = this.#samples.subarray(0, this.#count).sort();
    return quantiles.map((q) => {
      if (sorted.length === 0) return 0;
      const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
      return Math.round((sorted[rank] as number) * 1000);
    });
  }
}
