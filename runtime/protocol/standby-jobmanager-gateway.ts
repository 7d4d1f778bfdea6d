// A JobManager process ready in the warm pool, as a Dispatcher that can reach it sees it. The job itself
// comes through the store (the claim lease), which works where no call can reach the process; a call
// here only makes the process read its claim now instead of at its next poll.
export interface StandbyJobManagerGateway {
  /**
   * A Dispatcher took the claim of the ready period `holder`: read it now. Only a hint, safe to repeat
   * and to ignore: the claim lease alone decides which job the process runs.
   */
  claimTaken(holder: string): Promise<void>;
  /** The idle TaskExecutors the process keeps for the next job while it is ready (none otherwise), for the dashboard. */
  warmTaskExecutors(): Promise<readonly WarmTaskExecutorInfo[]>;
}

export interface WarmTaskExecutorInfo {
  readonly resourceId: string;
  readonly numberOfSlots: number;
}

export const STANDBY_JOB_MANAGER_METHODS = ['claimTaken', 'warmTaskExecutors'] as const satisfies readonly (keyof StandbyJobManagerGateway)[];
