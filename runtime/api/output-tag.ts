// Side outputs (Flink's OutputTag): a named, typed second output of an operator, read with getSideOutput.
import { InvalidJobDefinitionError } from './errors.js';

/** Names a side output whose records are of type T. Two tags with the same id are the same output. */
export class OutputTag<T> {
  /** Only for the compiler: keeps T, so a tag of strings cannot receive numbers. */
  declare readonly __elementType?: T;

  constructor(readonly id: string) {
    if (typeof id !== 'string' || id.length === 0) {
      throw new InvalidJobDefinitionError(`new OutputTag(id) needs a non-empty string id, found ${JSON.stringify(id) ?? String(id)}`);
    }
  }

  toString(): string {
    return `OutputTag(${this.id})`;
  }
}

/** The id of a tag from any copy of the API (a job library bundles its own): read, never instanceof. */
export function outputTagId(tag: unknown, call: string): string {
  const id = (tag as { id?: unknown } | null)?.id;
  if (tag === null || typeof tag !== 'object' || typeof id !== 'string' || id.length === 0) {
    throw new InvalidJobDefinitionError(`${call} needs an OutputTag (new OutputTag<T>('name')), found ${tag === null ? 'null' : typeof tag}`);
  }
  return id;
}
