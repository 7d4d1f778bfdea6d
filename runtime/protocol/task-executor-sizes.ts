// Which TaskExecutor sizes a platform can start, asked by the Dispatcher's admission control
// (runtime/dispatcher/admission.ts).
import type { ResourceProfile } from '../core/resource-profile.js';

/**
 * Port: which TaskExecutor sizes this platform can start (Fargate's CPU / memory pairs on AWS; the
 * machine's cores and memory locally).
 */
export interface TaskExecutorSizes {
  /** Why no TaskExecutor of `slots` slots of `profile` can be started here; undefined when one can. */
  refusal(profile: ResourceProfile, slots: number): string | undefined;
}
