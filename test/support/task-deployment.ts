// A TaskDeploymentDescriptor for tests that run operator chains directly: one subtask of one vertex, in
// slot allocation 'a1', with no library, inputs or outputs unless `extra` gives them.
import { AllocationId, ExecutionAttemptId, JobId } from '../../runtime/core/ids.js';
import type { OperatorSpec } from '../../runtime/jobgraph/jobgraph.js';
import type { TaskDeploymentDescriptor } from '../../runtime/protocol/task-deployment.js';

export function taskDeployment(operators: OperatorSpec[], extra: Partial<TaskDeploymentDescriptor> = {}): TaskDeploymentDescriptor {
  return {
    jobId: JobId.of('job-test'),
    vertexId: 'v1',
    taskName: 'chain (1/1)',
    attemptId: ExecutionAttemptId.random(),
    attemptNumber: 0,
    subtaskIndex: 0,
    parallelism: 1,
    allocationId: AllocationId.of('a1'),
    library: { sha256: 'none' },
    program: { export: 'default', args: [] },
    operators,
    inputs: [],
    outputs: [],
    ...extra,
  };
}
