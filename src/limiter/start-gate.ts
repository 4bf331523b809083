/**
 * The calls issued while the store is still making its first connections (see
 * `ScriptStore.firstConnection`): held here, each within its deadline, and sent together once
 * the store is usable — so that a process taking traffic as soon as it starts does not fail its
 * first calls. A held call that reaches its deadline fails with `UnavailableError` (nothing was
 * sent: not a `TimeoutError`). Once open, the gate stays open and costs one branch per call.
 */
import type { InFlight } from './calls.js';

export class StartGate {
  /** The calls waiting; `undefined` once open. */
  #held: InFlight[] | undefined;
  /** Settles once the gate is open (never rejects). */
  readonly opened: Promise<void>;

  /**
   * @param waiting the store's first connection, `undefined` when it is usable already
   * @param release sends the held calls that are still waiting, in the order they came
   */
  constructor(waiting: Promise<void> | undefined, release: (calls: InFlight[]) => void) {
    if (waiting === undefined) {
      this.#held = undefined;
      this.opened = Promise.resolve();
      return;
    }
    this.#held = [];
    this.opened = waiting
      .catch(() => {})
      .then(() => {
        const held = this.#held ?? [];
        this.#held = undefined;
        const waiting = held.filter((call) => {
          call.held = false;
          return !call.settled;
        });
        if (waiting.length > 0) release(waiting);
      });
  }

  /** Holds `call` until the gate opens; false when it is open (send the call now). */
  hold(call: InFlight): boolean {
    if (this.#held === undefined) return false;
    call.held = true;
    this.#held.push(call);
    return true;
  }
}
