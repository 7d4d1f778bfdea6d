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
