// The REST bodies the dashboard reads (runtime/dashboard/API.md), from the modules that define them:
// types only (erased from the browser bundle), and the state vocabularies, which are plain constants.
import { ExecutionState, JobStatus } from '../../jobgraph/job-status';

export type {
  CancelJobResponse,
  ErrorResponse,
  JobDetails,
  JobExceptionsResponse,
  JobPlanResponse as JobPlan,
  JobSummary,
  JobThroughputResponse as ThroughputResponse,
  ListJobsResponse,
  OverviewResponse,
  VertexDetails,
} from '../../protocol/rest-api';
export type {
  CheckpointingStatisticsResponse as CheckpointingStatistics,
  CheckpointStatisticsJson as CheckpointStatistics,
} from '../../protocol/checkpoint-rest';
export type { JobException, SubtaskDetails as Subtask, SlotTaskView as TaskManagerTask } from '../../ha/job-store';
export type { TaskCounts } from '../../jobgraph/job-status';
import type { JobPlanResponse, TaskManagersResponse as Managers } from '../../protocol/rest-api';

export type TaskManagersResponse = Managers;
export type TaskManagerInfo = Managers['taskManagers'][number];
export type PlanVertex = JobPlanResponse['vertices'][number];
export type PlanEdge = JobPlanResponse['edges'][number];

export { JobStatus };
/** Task states in lifecycle order: the order matters where a vertex's state is "the earliest one present". */
export const TaskState = ExecutionState;
export type TaskState = ExecutionState;
export const TASK_STATES: readonly TaskState[] = Object.values(ExecutionState);
