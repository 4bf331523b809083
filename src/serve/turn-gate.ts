/**
 * Starts the decisions of every call that arrived in one pass over the sockets together, so
 * that the limiter coalesces them into one script call per Redis node.
 *
 * Node.js runs each HTTP/2 frame's callbacks in a callback scope of its own, and drains the
 * microtasks at its end: the limiter's coalescer, which flushes in a microtask (see
 * `limiter/coalescer.ts`), would send every call's `takeAll` alone — one Redis round trip
 * (and one socket write on each side) per call, whatever the load. Deferred to the check
 * phase (`setImmediate`), right after the event loop has read every socket that had data,
 * the calls of that pass start in one turn and go in one batch. A lone call waits for no
 * more than the end of the current poll phase.
 */
export class TurnGate {
  #queue: (() => void)[] = [];
  #scheduled = false;
  readonly #flush = () => {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    for (const start of queue) start();
  };

  /** Runs `start` in the next check phase, with every other call queued until then. */
  run<T>(start: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push(() => {
        try {
          start().then(resolve, reject);
        } catch (error) {
          reject(error);
        }
      });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(this.#flush);
      }
    });
  }
}
