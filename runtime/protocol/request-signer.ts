// How the CLI's REST client signs its requests to a deployed cluster (runtime/cli/rest-client.ts).

/** A request to the Dispatcher as it will go on the wire, for a signer to sign. */
export interface OutgoingRequest {
  readonly method: string;
  readonly url: URL;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
}

/**
 * Signs requests to a deployed cluster whose API Gateway authorizes callers with IAM (SigV4): the
 * adapter is runtime/aws/sigv4-signer.ts, loaded only when the CLI talks to such a cluster.
 */
export interface RequestSigner {
  /** The headers to send: `headers` plus the signature's (authorization, x-amz-date, ...). */
  sign(request: OutgoingRequest): Promise<Record<string, string>>;
}
