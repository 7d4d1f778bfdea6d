// Where the Dispatcher function finds the cluster secret: read from Secrets Manager by ARN at cold start,
// so the value is never part of the function's configuration. Tests and emulators, which have no Secrets
// Manager, may pass the value itself in FLOE_SECRET instead.
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ConfigurationError, errorMessage, FloeError } from '../core/errors.js';
import { credentialsFromEnv } from './aws-env.js';
import { baseClientOptions, withCallLog } from './clients.js';
import { callLogTargetFromEnv } from './aws-call-log.js';
import { FloeEnv } from '../core/floe-env.js';

/** Reads one secret's string value by ARN; the port the function's cold start uses (tests pass their own). */
export type SecretReader = (secretArn: string) => Promise<string>;

/** A reader over Secrets Manager's GetSecretValue, configured from the environment like the other clients. */
export function secretsManagerReader(env: NodeJS.ProcessEnv): SecretReader {
  return async (secretArn) => {
    const region = env[FloeEnv.AWS_REGION] || env['AWS_REGION'];
    if (region === undefined || region === '')
      throw new ConfigurationError(`${FloeEnv.AWS_REGION} (or AWS_REGION) is not set; it is needed to read the cluster secret from Secrets Manager`);
    const endpoint = env[FloeEnv.SECRETS_MANAGER_ENDPOINT] || env[FloeEnv.AWS_ENDPOINT] || undefined;
    const credentials = credentialsFromEnv(env);
    const config = { region, ...(endpoint !== undefined ? { endpoint } : {}), ...(credentials !== undefined ? { credentials } : {}) };
    const callLog = callLogTargetFromEnv(env);
    const client = withCallLog(new SecretsManagerClient(baseClientOptions(config)), { ...config, ...(callLog !== undefined ? { callLog } : {}) });
    try {
      const answer = await client.send(new GetSecretValueCommand({ SecretId: secretArn }));
      if (answer.SecretString === undefined || answer.SecretString === '') {
        throw new ConfigurationError(`the secret ${secretArn} has no string value; the cluster secret must be stored as a SecretString`);
      }
      return answer.SecretString;
    } finally {
      client.destroy();
    }
  };
}

/**
 * The cluster secret: from Secrets Manager when FLOE_SECRET_ARN is set (a deployed stack), else the value
 * of FLOE_SECRET (tests and emulators). Read once per process: a rotated secret reaches a Lambda
 * container at its next cold start.
 */
export async function resolveClusterSecret(env: NodeJS.ProcessEnv, read: SecretReader = secretsManagerReader(env)): Promise<string> {
  const arn = env[FloeEnv.SECRET_ARN];
  if (arn !== undefined && arn !== '') {
    let value: string;
    try {
      value = await read(arn);
    } catch (error) {
      if (error instanceof ConfigurationError) throw error;
      // A failed cold start is tried again by the next request, so a passing fault heals itself.
      throw new FloeError(
        'SECRET_UNAVAILABLE',
        `could not read the cluster secret ${arn} from Secrets Manager: ${errorMessage(error)}; check that the function's role may secretsmanager:GetSecretValue on it`,
        { cause: error, retryable: true },
      );
    }
    return value;
  }
  const value = env[FloeEnv.SECRET];
  if (value !== undefined && value !== '') return value;
  throw new ConfigurationError(
    `neither ${FloeEnv.SECRET_ARN} nor ${FloeEnv.SECRET} is set; every REST call and RPC of the cluster carries the cluster secret (a deployed stack sets ${FloeEnv.SECRET_ARN})`,
  );
}
