// SDK failures turned into FloeErrors that name the service, the call and the resource, and say whether
// trying again can help.
import { FloeError } from '../core/errors.js';
import { FloeEnv } from '../core/floe-env.js';

const PERMANENT = new Set([
  'ResourceNotFoundException',
  'NoSuchBucket',
  'AccessDeniedException',
  'AccessDenied',
  'UnrecognizedClientException',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ValidationException',
]);

export class AwsRequestError extends FloeError {
  constructor(service: string, operation: string, resource: string, cause: unknown) {
    const name = (cause as { name?: unknown } | null)?.name;
    const message = cause instanceof Error ? cause.message : String(cause);
    const permanent = typeof name === 'string' && PERMANENT.has(name);
    super(
      'AWS_REQUEST_FAILED',
      `${service} ${operation} on ${resource} failed: ${String(name ?? 'Error')}: ${message}; ${hint(typeof name === 'string' ? name : '', resource)}`,
      {
        cause,
        retryable: !permanent,
        details: { service, operation, resource, awsError: name },
      },
    );
  }
}

function hint(name: string, resource: string): string {
  switch (name) {
    case 'ResourceNotFoundException':
    case 'NoSuchBucket':
      return `${resource} does not exist in this region and endpoint: deploy it (the CDK app creates it) or fix ${FloeEnv.LEASE_TABLE} / ${FloeEnv.JOB_TABLE} / ${FloeEnv.BUCKET}`;
    case 'AccessDeniedException':
    case 'AccessDenied':
      return 'the role lacks a permission on it: grant it through the CDK construct';
    case 'UnrecognizedClientException':
    case 'InvalidAccessKeyId':
    case 'SignatureDoesNotMatch':
      return 'the credentials are not valid for this endpoint';
    default:
      return 'the SDK already retried; the caller may retry later';
  }
}

/** Runs one SDK call, rethrowing its failure as an AwsRequestError; FloeErrors pass through. */
export async function awsCall<T>(service: string, operation: string, resource: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof FloeError) throw error;
    throw new AwsRequestError(service, operation, resource, error);
  }
}
