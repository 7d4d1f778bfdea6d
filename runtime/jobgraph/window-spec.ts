// A window operator's assigner and trigger as plain data, as a JobGraph carries them: the window sizes,
// slides, gaps and offsets (milliseconds) and the time domain the windows live in.

/** Which clock windows follow: event timestamps and watermarks, or the task's processing time. */
export type WindowTimeDomain = 'event-time' | 'processing-time';

/** Flink's Tumbling/Sliding/…SessionWindows, event or processing time. */
export type WindowAssignerSpec =
  | { readonly type: 'tumbling'; readonly timeDomain: WindowTimeDomain; readonly size: number; readonly offset: number }
  | { readonly type: 'sliding'; readonly timeDomain: WindowTimeDomain; readonly size: number; readonly slide: number; readonly offset: number }
  | { readonly type: 'session'; readonly timeDomain: WindowTimeDomain; readonly gap: number };

/**
 * When a window fires (Flink's EventTimeTrigger, ProcessingTimeTrigger, CountTrigger): at its end in
 * event time, at its end in processing time, or every `count` elements. Windows are cleaned up at their
 * end plus the allowed lateness whatever the trigger.
 */
export type WindowTriggerSpec = { readonly type: 'event-time' } | { readonly type: 'processing-time' } | { readonly type: 'count'; readonly count: number };

/** What an operator does with a window's elements: folds them as they come (reduce, aggregate) or keeps them (process). */
export type WindowFunctionKind = 'reduce' | 'aggregate' | 'process';

/** The trigger a window assigner has when none is set: its own time domain's. */
export const defaultTriggerOf = (assigner: WindowAssignerSpec): WindowTriggerSpec =>
  assigner.timeDomain === 'event-time' ? { type: 'event-time' } : { type: 'processing-time' };

/** A short description, as Flink names a window operator: `TumblingEventTimeWindows(5000)`. */
export function describeWindowAssigner(assigner: WindowAssignerSpec): string {
  const time = assigner.timeDomain === 'event-time' ? 'EventTime' : 'ProcessingTime';
  switch (assigner.type) {
    case 'tumbling':
      return `Tumbling${time}Windows(${assigner.size}${assigner.offset !== 0 ? `, ${assigner.offset}` : ''})`;
    case 'sliding':
      return `Sliding${time}Windows(${assigner.size}, ${assigner.slide}${assigner.offset !== 0 ? `, ${assigner.offset}` : ''})`;
    case 'session':
      return `${assigner.timeDomain === 'event-time' ? 'EventTime' : 'ProcessingTime'}SessionWindows(${assigner.gap})`;
    default:
      return assigner satisfies never;
  }
}

/**
 * Why the producers of window operator `op` cannot fold its input per key and pane before the exchange,
 * or undefined when they can: only event-time tumbling and sliding windows fired by their watermark,
 * with nothing late kept or sent aside (a partial would reach them instead of the elements), and a
 * function that combines partial results (reduce, or an aggregate with merge).
 */
export function windowPreAggregationProblem(op: {
  readonly window: WindowAssignerSpec;
  readonly trigger: WindowTriggerSpec;
  readonly allowedLateness: number;
  readonly lateDataTag?: string | undefined;
  readonly windowFunction: string;
  readonly merge?: unknown;
}): string | undefined {
  if (op.window.type === 'session' || op.window.timeDomain !== 'event-time')
    return `needs event-time tumbling or sliding windows, found ${op.window.timeDomain} ${op.window.type} windows`;
  if (op.trigger.type !== 'event-time') return `needs the event-time trigger, found a ${op.trigger.type} trigger`;
  if (op.allowedLateness !== 0 || op.lateDataTag !== undefined) return 'needs windows without allowed lateness or a late-data side output';
  if (op.windowFunction === 'reduce' || (op.windowFunction === 'aggregate' && op.merge !== undefined)) return undefined;
  return `needs a reduce or an aggregate with merge, found ${op.windowFunction === 'aggregate' ? 'an aggregate without merge' : `a ${op.windowFunction} function`}`;
}
