/** The queue of a pipelined connection's callers, answered in the order they were sent. */

/** A first-in first-out queue that does not copy on every shift. */
export class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    const items = this.#items;
    if (this.#head >= items.length) return undefined;
    const item = items[this.#head];
    items[this.#head++] = undefined;
    if (this.#head === items.length) {
      items.length = 0;
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= items.length) {
      this.#items = items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  /** Empties the queue, returning what it held in order. */
  drain(): T[] {
    const rest = this.#items.slice(this.#head) as T[];
    this.#items = [];
    this.#head = 0;
    return rest;
  }
}
