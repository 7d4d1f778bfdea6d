// The CLI's RequestSigner for a deployed cluster: SigV4 for service `execute-api`, with credentials from
// the AWS SDK's standard chain (environment, shared config and SSO profiles, web identity, container
// and instance roles). The CLI imports this module only when it talks to such a cluster.
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import { ConfigurationError, FloeError } from '../core/errors.js';
import type { OutgoingRequest, RequestSigner } from '../protocol/request-signer.js';
import type { AwsCredentials } from './clients.js';

/** The service name API Gateway's IAM authorization checks signatures for. */
export const EXECUTE_API_SERVICE = 'execute-api';

/** No credentials could be found, or they could not be loaded. */
export class AwsCredentialsError extends FloeError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('AWS_CREDENTIALS', message, { ...options, retryable: false });
  }
}

type CredentialProvider = () => Promise<AwsCredentials>;

export interface SigV4SignerOptions {
  readonly region: string;
  /** @default - the SDK's default chain (`fromNodeProviderChain`) */
  readonly credentials?: AwsCredentials | CredentialProvider;
  /** @default Date.now */
  readonly now?: () => number;
}

export function createSigV4Signer(options: SigV4SignerOptions): RequestSigner {
  if (options.region === '') throw new ConfigurationError("signing a request needs the API's region: set AWS_REGION (an execute-api URL names its own)");
  process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
  const provider = options.credentials ?? fromNodeProviderChain();
  const credentials: CredentialProvider =
    typeof provider === 'function'
      ? async () => {
          try {
            return await provider();
          } catch (e) {
            throw new AwsCredentialsError(
              `no AWS credentials to sign the request with (${(e as Error).message}); set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or log in with 'aws sso login'`,
              { cause: e },
            );
          }
        }
      : async () => provider;
  const signer = new SignatureV4({ service: EXECUTE_API_SERVICE, region: options.region, credentials, sha256: Sha256 });
  const now = options.now ?? Date.now;
  return {
    async sign(request: OutgoingRequest): Promise<Record<string, string>> {
      const { url } = request;
      const query: Record<string, string | string[]> = {};
      for (const [k, v] of url.searchParams) {
        const prior = query[k];
        query[k] = prior === undefined ? v : [...(Array.isArray(prior) ? prior : [prior]), v];
      }
      // The host header is signed as fetch will send it (with a port only when not the default one).
      const signed = await signer.sign(
        {
          method: request.method,
          protocol: url.protocol,
          hostname: url.hostname,
          ...(url.port === '' ? {} : { port: Number(url.port) }),
          path: url.pathname,
          query,
          headers: { ...request.headers, host: url.host },
          ...(request.body === undefined ? {} : { body: request.body }),
        },
        { signingDate: new Date(now()) },
      );
      // fetch sets host itself (and refuses to be told).
      const { host: _host, ...headers } = signed.headers;
      return headers;
    },
  };
}
