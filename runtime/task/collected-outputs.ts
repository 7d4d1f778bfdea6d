// What a window's ProcessWindowFunction collects during one call — main-output records and side-output
// records, in order — kept in arrays reused from call to call (emptying them per window fired costs more
// than the window), then sent to the operator's Output, waiting where the output asks (backpressure).
import type { Output } from './stream-operator.js';
import { isThenable } from './task-io.js';

export class CollectedOutputs {
  private readonly sides: (string | undefined)[] = [];
  private readonly values: unknown[] = [];
  /** How many entries of the arrays the current call made. */
  private count = 0;
  /** The Collector the process function gets: its records go to the main output. */
  readonly collector: { collect(value: unknown): void } = { collect: (value) => this.collect(undefined, value) };

  /** `to.output` is read at each emit (an operator's context may get its output after it is made). */
  constructor(private readonly to: { readonly output: Output }) {}

  /** A new call begins: what the last one collected was sent. */
  reset(): void {
    this.count = 0;
  }

  /** A record of the main output (side undefined) or of the side output with that tag id. */
  collect(side: string | undefined, value: unknown): void {
    this.sides[this.count] = side;
    this.values[this.count++] = value;
  }

  /** Sends what the call collected, from the `from`th on, at event time `ts`. */
  emit(ts: number, from = 0): Promise<void> | void {
    const { sides, values } = this;
    const output = this.to.output;
    for (let i = from; i < this.count; i++) {
      const side = sides[i];
      const sent = side === undefined ? output.emit(values[i], ts) : output.emitSide(side, values[i], ts);
      if (isThenable(sent)) return Promise.resolve(sent).then(() => this.emit(ts, i + 1));
    }
  }
}
