/**
 * A bounded FIFO between two stages: push waits while the queue is full (backpressure), pop
 * waits while it is empty. close() wakes every waiter; pop then drains what is left and gives
 * undefined at the end.
 */
export class BoundedQueue<T> {
  private readonly items: T[] = [];
  private readonly pushWaiters: (() => void)[] = [];
  private readonly popWaiters: (() => void)[] = [];
  private closed = false;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`queue capacity must be >= 1, got ${capacity}`);
  }

  get size(): number {
    return this.items.length;
  }

  async push(item: T): Promise<void> {
    while (this.items.length >= this.capacity && !this.closed)
      await new Promise<void>((resolve) => this.pushWaiters.push(resolve));
    if (this.closed) throw new Error("queue closed");
    this.items.push(item);
    this.popWaiters.shift()?.();
  }

  async pop(): Promise<T | undefined> {
    while (this.items.length === 0 && !this.closed) await new Promise<void>((resolve) => this.popWaiters.push(resolve));
    const item = this.items.shift();
    this.pushWaiters.shift()?.();
    return item;
  }

  close(): void {
    this.closed = true;
    for (const wake of this.pushWaiters.splice(0)) wake();
    for (const wake of this.popWaiters.splice(0)) wake();
  }
}
