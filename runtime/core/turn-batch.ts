// What a component decides in one turn of the event loop, sent at the next in one go: a job's end frees
// thousands of slots in one turn, and one call per TaskExecutor (or per ResourceManager) beats one per slot.

/** Gathers the items added in one turn and hands them to `flush` together, on the next (`setImmediate`). */
export class TurnBatch<T> {
  private items: T[] = [];

  constructor(private readonly flush: (items: T[]) => void) {}

  add(item: T): void {
    this.items.push(item);
    if (this.items.length > 1) return;
    setImmediate(() => {
      const items = this.items;
      this.items = [];
      this.flush(items);
    });
  }
}
