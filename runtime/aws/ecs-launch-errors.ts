// What ECS says when a launch fails, sorted into a few codes: whether a retry can help, and what to
// check when it does not clear. One classifier reads RunTask's exceptions and failures and the reasons a
// task stopped before it ran, so every path of the launcher words the same trouble the same way.
import { errorMessage, FloeError } from '../core/errors.js';
import { FloeEnv } from '../core/floe-env.js';

export const EcsLaunchErrorCode = {
  /** ECS answered ThrottlingException "Rate exceeded". Retried. */
  THROTTLED: 'THROTTLED',
  /** No Fargate capacity ("Capacity is unavailable at this time…"), a RESOURCE:* or AGENT failure, or a Spot task taken back. Retried. */
  CAPACITY_UNAVAILABLE: 'CAPACITY_UNAVAILABLE',
  /**
   * The account's Fargate quota is used up ("You've reached the limit on the number of vCPUs you can run
   * concurrently", or of tasks). Retried (tasks that end free some of it), and the next capacity provider
   * is tried: Fargate Spot and on-demand Fargate have quotas of their own.
   */
  QUOTA_EXCEEDED: 'QUOTA_EXCEEDED',
  /** The image is not built for the task definition's CPU architecture ("exec format error", no matching manifest for the platform). Not retried. */
  IMAGE_PLATFORM_MISMATCH: 'IMAGE_PLATFORM_MISMATCH',
  /** The task's network interface could not be created or attached (RESOURCE:ENI, "Timeout waiting for network interface provisioning…"). Retried. */
  ENI_PROVISIONING: 'ENI_PROVISIONING',
  /** ECS failed on its side (ServerException, a 5xx). Retried. */
  ECS_UNAVAILABLE: 'ECS_UNAVAILABLE',
  /** The call got no answer: timed out, reset ("socket hang up"), refused, or DNS failed for now. Retried with the same clientToken. */
  NETWORK: 'NETWORK',
  /** The task could not fetch its secrets or registry credentials ("unable to pull secrets or registry auth"). Retried unless access was denied. */
  SECRETS_UNAVAILABLE: 'SECRETS_UNAVAILABLE',
  /** The image could not be pulled (CannotPullContainerError). Retried unless the image is missing or access was denied. */
  IMAGE_PULL_FAILED: 'IMAGE_PULL_FAILED',
  /** A role lacks a permission (AccessDeniedException, "is not authorized to perform"), or the account is blocked. Not retried. */
  ACCESS_DENIED: 'ACCESS_DENIED',
  /** The cluster or the task definition does not exist (ClusterNotFoundException, MISSING, "TaskDefinition not found"). Not retried. */
  NOT_FOUND: 'NOT_FOUND',
  /** ECS rejected the request as built: ClientException, InvalidParameterException, platform or feature mismatch, ATTRIBUTE, LOCATION. Not retried. */
  INVALID_REQUEST: 'INVALID_REQUEST',
  /** The task stopped for reasons of its own (its essential container exited, health checks failed). Not retried here. */
  TASK_FAILED: 'TASK_FAILED',
  /** Anything else ECS said that this launcher does not know; not retried. */
  RUN_TASK_FAILED: 'RUN_TASK_FAILED',
  /** stop() came while the launch was still being retried. */
  STOPPED_BEFORE_START: 'STOPPED_BEFORE_START',
} as const;
export type EcsLaunchErrorCode = (typeof EcsLaunchErrorCode)[keyof typeof EcsLaunchErrorCode];

export class EcsLaunchError extends FloeError {
  declare readonly code: EcsLaunchErrorCode;
  constructor(code: EcsLaunchErrorCode, message: string, options: { retryable: boolean; cause?: unknown; details?: unknown }) {
    super(code, message, options);
  }
}

/** One answer from ECS as classifyEcsFailure reads it: a thrown error, a RunTask failure, or a task that stopped. */
export interface EcsFailureReport {
  /** A thrown error's name: `AccessDeniedException`, `TimeoutError`, … */
  readonly errorName?: string;
  /** Node's code on a thrown network error: `ECONNRESET`, `EAI_AGAIN`, … */
  readonly errorCode?: string;
  /** HTTP status of an error answer, when there was one. */
  readonly httpStatus?: number;
  readonly message?: string;
  /** RunTask's `failures[].reason` (`RESOURCE:CPU`, `AGENT`, …) or a stopped container's `reason`. */
  readonly failureReason?: string;
  readonly failureDetail?: string;
  /** A stopped task's `stopCode` (`TaskFailedToStart`, `SpotInterruption`, …). */
  readonly stopCode?: string;
  /** The capacity provider the RunTask asked (`FARGATE_SPOT`, …): a quota is per provider. */
  readonly capacityProvider?: string;
}

export interface EcsFailureClass {
  readonly code: EcsLaunchErrorCode;
  /** Whether the same launch may succeed later; transient trouble only, never a configuration mistake. */
  readonly retryable: boolean;
  /** What ECS said, joined into one line. */
  readonly text: string;
  /** What to check when it does not clear. */
  readonly hint: string;
}

/** Failures of the call itself that say nothing about the request: the answer may have been lost after ECS acted. */
const NETWORK_ERROR_NAMES = new Set(['TimeoutError']);
const NETWORK_ERROR_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH']);
const SERVER_ERROR_NAMES = new Set([
  'ServerException',
  'InternalFailure',
  'ServiceUnavailable',
  'ServiceUnavailableException',
  'RequestTimeout',
  'RequestTimeoutException',
]);
const INVALID_REQUEST_NAMES = new Set([
  'ClientException',
  'InvalidParameterException',
  'PlatformTaskDefinitionIncompatibilityException',
  'PlatformUnknownException',
  'UnsupportedFeatureException',
  'ConflictException',
]);
const ACCESS_DENIED_TEXT = /AccessDenied|access denied|is not authorized to perform|UnauthorizedOperation/i;

/**
 * Sorts what ECS said (a RunTask exception or failure, or why a task stopped before it ran) into the
 * codes above. The stop reasons name their cause in their prefix and carry the inner error after it, so
 * the prefix decides first: an AccessDeniedException inside "unable to pull secrets" is the execution
 * role's, not the launcher's. Strings are ECS's own, from its API failure reasons and stopped-task errors.
 */
export function classifyEcsFailure(what: EcsFailureReport): EcsFailureClass {
  const errorName = what.errorName ?? '';
  const reason = what.failureReason ?? '';
  const lead =
    errorName !== '' && what.errorCode !== undefined && what.errorCode !== errorName ? `${errorName} (${what.errorCode})` : errorName || what.errorCode;
  const text = [lead, what.failureReason, what.failureDetail, what.message].filter((s) => s !== undefined && s !== '').join(': ');
  const accessDenied = ACCESS_DENIED_TEXT.test(text);
  const is = (code: EcsLaunchErrorCode, retryable: boolean, hint: string): EcsFailureClass => ({ code, retryable, text, hint });

  // Before the pull and start errors that carry them: no retry can make an image run on another architecture.
  if (/exec format error|no matching manifest for|does not contain descriptor matching platform/i.test(text)) {
    return is(
      EcsLaunchErrorCode.IMAGE_PLATFORM_MISMATCH,
      false,
      "the image is built for another CPU architecture than the task definition's runtime platform: build it for that architecture (for ARM64, the default: docker buildx build --platform linux/arm64) or deploy with -c floe:cpuArchitecture=x86_64 to match an x86 image",
    );
  }
  if (/reached the limit on the number of (vCPUs|tasks)|vCPU (limit|quota)|LimitExceeded/i.test(text)) {
    const spot = /SPOT/i.test(what.capacityProvider ?? '');
    const quota = spot ? "'Fargate Spot vCPU resource count' (L-36FBB829)" : "'Fargate On-Demand vCPU resource count' (L-3032A538)";
    return is(
      EcsLaunchErrorCode.QUOTA_EXCEEDED,
      true,
      `the account's Fargate quota ${quota} is used up: raise it in Service Quotas (service 'AWS Fargate'), lower 'resourcemanager.max-taskmanagers' or the jobs' parallelism, or configure a fallback capacity provider`,
    );
  }
  if (/CannotPullContainerError/i.test(text)) {
    const missing = accessDenied || /not found|manifest unknown|does not exist|unauthorized|forbidden/i.test(text);
    return missing
      ? is(
          EcsLaunchErrorCode.IMAGE_PULL_FAILED,
          false,
          'check that the image and tag exist and that the task execution role may pull them (ecr:GetAuthorizationToken, ecr:BatchGetImage, ecr:GetDownloadUrlForLayer)',
        )
      : is(
          EcsLaunchErrorCode.IMAGE_PULL_FAILED,
          true,
          "check that the task's subnets reach the registry (a NAT gateway, ECR VPC endpoints, or a public IP in a public subnet)",
        );
  }
  if (/unable to pull secrets or registry auth/i.test(text)) {
    return accessDenied
      ? is(
          EcsLaunchErrorCode.SECRETS_UNAVAILABLE,
          false,
          'grant the task execution role read access to the secrets and parameters the task definition names (secretsmanager:GetSecretValue, ssm:GetParameters, kms:Decrypt)',
        )
      : is(
          EcsLaunchErrorCode.SECRETS_UNAVAILABLE,
          true,
          "check that the task's subnets reach Secrets Manager, SSM and ECR (a NAT gateway, VPC endpoints, or a public IP in a public subnet)",
        );
  }
  if (errorName === 'ThrottlingException' || errorName === 'TooManyRequestsException' || /rate exceeded|throttl/i.test(text)) {
    return is(EcsLaunchErrorCode.THROTTLED, true, "start fewer workers at once or raise the account's ECS API limits");
  }
  if (errorName === 'BlockedException') {
    return is(EcsLaunchErrorCode.ACCESS_DENIED, false, 'the AWS account is blocked from ECS; contact AWS Support');
  }
  if (errorName === 'AccessDeniedException' || accessDenied) {
    return is(
      EcsLaunchErrorCode.ACCESS_DENIED,
      false,
      "grant the launcher's role ecs:RunTask on the task definition and iam:PassRole on its task and execution roles (the CDK construct's grants do both)",
    );
  }
  if (NETWORK_ERROR_NAMES.has(errorName) || (what.errorCode !== undefined && NETWORK_ERROR_CODES.has(what.errorCode))) {
    return is(
      EcsLaunchErrorCode.NETWORK,
      true,
      `check that this process reaches the ECS endpoint (DNS, a NAT gateway or an ECS VPC endpoint, ${FloeEnv.ECS_ENDPOINT})`,
    );
  }
  if (SERVER_ERROR_NAMES.has(errorName) || (what.httpStatus ?? 0) >= 500) {
    return is(EcsLaunchErrorCode.ECS_UNAVAILABLE, true, 'ECS failed on its side; see the AWS Health Dashboard for the region');
  }
  if (reason === 'RESOURCE:ENI' || /\bENI\b/.test(text) || /network interface provision/i.test(text)) {
    return is(EcsLaunchErrorCode.ENI_PROVISIONING, true, "check the subnets' free IP addresses and the account's ENI limit");
  }
  if (
    reason.startsWith('RESOURCE:') ||
    reason === 'AGENT' ||
    what.stopCode === 'SpotInterruption' ||
    /capacity is unavailable|insufficient capacity|no container instances|spot task was interrupted/i.test(text)
  ) {
    return is(EcsLaunchErrorCode.CAPACITY_UNAVAILABLE, true, 'try other subnets or availability zones, a smaller task size, or later');
  }
  if (
    errorName === 'ClusterNotFoundException' ||
    reason === 'MISSING' ||
    /TaskDefinition not found|unable to describe task definition|cluster not found/i.test(text)
  ) {
    return is(
      EcsLaunchErrorCode.NOT_FOUND,
      false,
      `check the cluster name and region (${FloeEnv.ECS_CLUSTER}) and that the task definition is registered and ACTIVE (${FloeEnv.ECS_TASK_DEFINITION_JOBMANAGER}, ${FloeEnv.ECS_TASK_DEFINITION_TASKEXECUTOR})`,
    );
  }
  if (INVALID_REQUEST_NAMES.has(errorName) || reason === 'ATTRIBUTE' || reason === 'LOCATION') {
    return is(
      EcsLaunchErrorCode.INVALID_REQUEST,
      false,
      'check the task definition (Fargate-compatible, awsvpc network mode, a supported platform version) against the subnets and security groups',
    );
  }
  if (/Essential container in task exited|failed (ELB|container) health checks|CannotStartContainerError|OutOfMemoryError/i.test(text)) {
    return is(EcsLaunchErrorCode.TASK_FAILED, false, 'the worker itself failed; read its log');
  }
  return is(EcsLaunchErrorCode.RUN_TASK_FAILED, false, "check the task definition, the cluster and the launcher's IAM permissions");
}

/** Reads a thrown SDK or network error into a report. */
export function reportOfError(error: unknown): EcsFailureReport {
  const e = (typeof error === 'object' && error !== null ? error : {}) as { name?: unknown; code?: unknown; $metadata?: { httpStatusCode?: unknown } };
  return {
    ...(typeof e.name === 'string' ? { errorName: e.name } : {}),
    ...(typeof e.code === 'string' ? { errorCode: e.code } : {}),
    ...(typeof e.$metadata?.httpStatusCode === 'number' ? { httpStatus: e.$metadata.httpStatusCode } : {}),
    message: errorMessage(error),
  };
}
