/**
 * What a node (or the one server) has in flight, and whether it stopped answering.
 *
 * A connection that stops answering — a black hole, a load balancer that lost its state, a
 * paused VM — holds every call written to it until the operating system gives up on the
 * socket, minutes later. Whatever the client does, the limiter does not wait that long: a
 * script call unanswered for `stallTimeoutMs` is abandoned — its callers, if their deadline
 * has not passed yet, get an `UnavailableError`, and its `maxInFlight` slots are freed — and
 * the node counts as stalled. While it is stalled, one call at a time is sent to it (a
 * probe), and every other call fails at once with an `UnavailableError`, so nothing piles up
 * in the client's queue. The first answer from the node, to the probe or to any call sent
 * before, ends the stall.
 */

/** One script call sent to a node and not answered yet. */
export class SentCall<R> {
  /** Given up on (see the module's doc): a late answer is ignored. */
  abandoned = false;
  /** Answered (or failed) by the store. */
  answered = false;

  constructor(
    /** The requests it carries. */
    readonly requests: readonly R[],
    /** Their items. */
    readonly items: number,
    /** `performance.now()` when it was sent. */
    readonly sentAt: number,
  ) {}
}

export class NodeWatch<R> {
  /** Calls in flight, oldest first; answered ones are dropped from the head. */
  #queue: (SentCall<R> | undefined)[] = [];
  #head = 0;
  /** The node stopped answering (see the module's doc). */
  stalled = false;
  /** The probe in flight while stalled. */
  probe: SentCall<R> | undefined;

  /** Starts tracking a call just sent. */
  track(call: SentCall<R>): void {
    this.#queue.push(call);
  }

  /**
   * The node answered `call`: the stall, if any, is over. Returns false when the call had
   * been abandoned (its requests have been failed already).
   */
  answered(call: SentCall<R>): boolean {
    this.stalled = false;
    this.probe = undefined;
    if (call.abandoned) return false;
    call.answered = true;
    this.#dropAnswered();
    return true;
  }

  /** `sentAt` of the oldest call in flight, or undefined when none is. */
  oldestSentAt(): number | undefined {
    return this.#queue[this.#head]?.sentAt;
  }

  /**
   * Abandons the calls in flight that were sent at or before `cutoff`, and returns them; the
   * node is then stalled.
   */
  overdue(cutoff: number): SentCall<R>[] {
    const head = this.#queue[this.#head];
    if (head === undefined || head.sentAt > cutoff) return [];
    const abandoned: SentCall<R>[] = [];
    for (let i = this.#head; i < this.#queue.length; i++) {
      const call = this.#queue[i] as SentCall<R>;
      if (call.sentAt > cutoff) break;
      if (call.answered || call.abandoned) continue;
      call.abandoned = true;
      abandoned.push(call);
      if (this.probe === call) this.probe = undefined;
    }
    this.stalled = true;
    this.#dropAnswered();
    return abandoned;
  }

  #dropAnswered(): void {
    const queue = this.#queue;
    let head = this.#head;
    while (head < queue.length) {
      const call = queue[head] as SentCall<R>;
      if (!call.answered && !call.abandoned) break;
      queue[head] = undefined;
      head++;
    }
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else if (head >= 1024 && head * 2 >= queue.length) {
      this.#queue = queue.slice(head);
      head = 0;
    }
    this.#head = head;
  }
}
