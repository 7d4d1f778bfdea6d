// A small STS emulator for the AWS tests: the AssumeRole call of the STS API (Query protocol: a form-encoded
// POST, an XML answer), for the roles it was started with. Each session gets a key of its own, one of the
// 100 the emulated S3 takes (test/aws/s3rver-process.mjs registers them), and a session token, and it
// records each session with the session policy it was given, so a test can check what a JobManager asked
// for. As STS does, it refuses a session policy over 2,048 characters, a duration a chained role may not
// have (over an hour), and a role it does not know. Test infrastructure: requests are not authenticated.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface AssumedSession {
  /** The key the session signs with. */
  readonly accessKeyId: string;
  readonly roleArn: string;
  readonly roleSessionName: string;
  /** The session policy, parsed; undefined when none was given. */
  readonly policy: unknown;
  readonly durationSeconds: number;
  /** The access key the caller signed with (from its Authorization header). */
  readonly callerAccessKeyId: string | undefined;
  readonly sessionToken: string;
  readonly expiration: Date;
}

export interface StsEmulatorOptions {
  /** The roles that may be assumed. */
  readonly roleArns: readonly string[];
  /** @default 0: the session lasts what DurationSeconds asks */
  readonly shortenBySeconds?: number;
}

const XMLNS = 'https://sts.amazonaws.com/doc/2011-06-15/';

/** Session `n`'s key and secret, as s3rver-process.mjs registers them (100, then reused). */
export function stsSessionKey(n: number): { readonly accessKeyId: string; readonly secretAccessKey: string } {
  const i = String(n % 100).padStart(4, '0');
  return { accessKeyId: `ASIAFLOETESTSESS${i}`, secretAccessKey: `floe-test-session-secret-${i}` };
}
const escapeXml = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export class StsEmulator {
  readonly endpoint: string;
  /** Every session handed out, in order. */
  readonly sessions: AssumedSession[] = [];
  /** Every AssumeRole refused, with why. */
  readonly refusals: { readonly code: string; readonly message: string }[] = [];

  private constructor(
    private readonly server: Server,
    port: number,
    private readonly options: StsEmulatorOptions,
  ) {
    this.endpoint = `http://127.0.0.1:${port}`;
  }

  static async start(options: StsEmulatorOptions): Promise<StsEmulator> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const emulator = new StsEmulator(server, (server.address() as AddressInfo).port, options);
    server.on('request', (req, res) => void emulator.onRequest(req, res));
    return emulator;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    const action = form.get('Action');
    if (req.method !== 'POST' || action !== 'AssumeRole') {
      this.error(res, 400, 'InvalidAction', `the emulator implements only POST Action=AssumeRole, found ${req.method} Action=${action ?? '(none)'}`);
      return;
    }
    const roleArn = form.get('RoleArn') ?? '';
    const roleSessionName = form.get('RoleSessionName') ?? '';
    const policyText = form.get('Policy');
    const durationSeconds = Number(form.get('DurationSeconds') ?? '3600');
    if (!this.options.roleArns.includes(roleArn)) {
      this.error(res, 403, 'AccessDenied', `not authorized to perform sts:AssumeRole on resource: ${roleArn}`);
      return;
    }
    if (!/^[\w+=,.@-]{2,64}$/.test(roleSessionName)) {
      this.error(res, 400, 'ValidationError', `1 validation error detected: Value '${roleSessionName}' at 'roleSessionName' failed to satisfy constraint`);
      return;
    }
    if (!Number.isInteger(durationSeconds) || durationSeconds < 900 || durationSeconds > 3600) {
      this.error(res, 400, 'ValidationError', `The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by role chaining.`);
      return;
    }
    let policy: unknown;
    if (policyText !== null) {
      if (policyText.length > 2048) {
        this.error(res, 400, 'PackedPolicyTooLarge', `Packed size of the session policy is ${policyText.length} characters; the limit is 2048`);
        return;
      }
      try {
        policy = JSON.parse(policyText);
      } catch {
        this.error(res, 400, 'MalformedPolicyDocument', 'The session policy is not valid JSON');
        return;
      }
    }
    const callerAccessKeyId = /Credential=([^/]+)\//.exec(String(req.headers['authorization'] ?? ''))?.[1];
    const sessionToken = `floe-test-session-${randomUUID()}`;
    const expiration = new Date(Date.now() + (durationSeconds - (this.options.shortenBySeconds ?? 0)) * 1000);
    const key = stsSessionKey(this.sessions.length);
    this.sessions.push({ accessKeyId: key.accessKeyId, roleArn, roleSessionName, policy, durationSeconds, callerAccessKeyId, sessionToken, expiration });
    const role = roleArn.split('/').pop() ?? 'role';
    const account = roleArn.split(':')[4] ?? '000000000000';
    res.writeHead(200, { 'content-type': 'text/xml' });
    res.end(
      `<AssumeRoleResponse xmlns="${XMLNS}"><AssumeRoleResult><Credentials>` +
        `<AccessKeyId>${key.accessKeyId}</AccessKeyId>` +
        `<SecretAccessKey>${key.secretAccessKey}</SecretAccessKey>` +
        `<SessionToken>${sessionToken}</SessionToken>` +
        `<Expiration>${expiration.toISOString()}</Expiration>` +
        `</Credentials><AssumedRoleUser><AssumedRoleId>AROAEMULATED:${escapeXml(roleSessionName)}</AssumedRoleId>` +
        `<Arn>arn:aws:sts::${account}:assumed-role/${escapeXml(role)}/${escapeXml(roleSessionName)}</Arn></AssumedRoleUser>` +
        `<PackedPolicySize>${policyText === null ? 0 : Math.ceil((policyText.length * 100) / 2048)}</PackedPolicySize>` +
        `</AssumeRoleResult><ResponseMetadata><RequestId>${randomUUID()}</RequestId></ResponseMetadata></AssumeRoleResponse>`,
    );
  }

  private error(res: ServerResponse, status: number, code: string, message: string): void {
    this.refusals.push({ code, message });
    res.writeHead(status, { 'content-type': 'text/xml' });
    res.end(
      `<ErrorResponse xmlns="${XMLNS}"><Error><Type>Sender</Type><Code>${code}</Code><Message>${escapeXml(message)}</Message></Error><RequestId>${randomUUID()}</RequestId></ErrorResponse>`,
    );
  }
}
