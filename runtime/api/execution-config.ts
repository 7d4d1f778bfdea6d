// A job's execution settings (Flink's ExecutionConfig): the periodic watermark interval and object reuse.
import { InvalidJobDefinitionError } from './errors.js';
import { DEFAULT_AUTO_WATERMARK_INTERVAL_MS } from './watermark-strategy.js';

/** Settings of a job's execution (Flink's ExecutionConfig). */
export class ExecutionConfig {
  private autoWatermarkIntervalMs = DEFAULT_AUTO_WATERMARK_INTERVAL_MS;
  private objectReuse = false;

  /** How often periodic watermarks are made ('pipeline.auto-watermark-interval'), in ms; 0 turns them off. */
  setAutoWatermarkInterval(intervalMs: number): this {
    if (!Number.isSafeInteger(intervalMs) || intervalMs < 0) {
      throw new InvalidJobDefinitionError(`setAutoWatermarkInterval(ms) needs an integer >= 0, found ${JSON.stringify(intervalMs) ?? String(intervalMs)}`);
    }
    this.autoWatermarkIntervalMs = intervalMs;
    return this;
  }

  getAutoWatermarkInterval(): number {
    return this.autoWatermarkIntervalMs;
  }

  /**
   * Lets the operators of a chain pass one record object to each other where they branch: the branches of
   * an operator with several chained consumers then all see the same object, so a function must not change
   * its input. Off by default: each branch but the last gets its own copy, as if it read an exchange.
   */
  enableObjectReuse(): this {
    this.objectReuse = true;
    return this;
  }

  /** Gives each branch of a chain its own copy of a record (the default). */
  disableObjectReuse(): this {
    this.objectReuse = false;
    return this;
  }

  isObjectReuseEnabled(): boolean {
    return this.objectReuse;
  }
}
