// The Dispatcher function's cluster secret: read by ARN from Secrets Manager (here a stand-in speaking its
// JSON protocol, which no emulator of ours serves), or passed as a value where there is none (tests).
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveClusterSecret, secretsManagerReader } from '../../runtime/aws/cluster-secret.js';
import { FloeEnv } from '../../runtime/core/floe-env.js';

const ARN = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:floe-cluster-AbCdEf';

/** A few lines of Secrets Manager: GetSecretValue on the secrets it holds, AccessDenied for one ARN. */
class SecretsManagerStandIn {
  readonly secrets = new Map<string, string>();
  readonly requests: { target: string | undefined; secretId: unknown }[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<SecretsManagerStandIn> {
    let self: SecretsManagerStandIn | undefined;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => self!.answer(req.headers['x-amz-target'] as string | undefined, Buffer.concat(chunks).toString('utf8'), res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    self = new SecretsManagerStandIn(server, `http://127.0.0.1:${port}`);
    return self;
  }

  private answer(target: string | undefined, body: string, res: import('node:http').ServerResponse): void {
    const { SecretId } = JSON.parse(body) as { SecretId?: string };
    this.requests.push({ target, secretId: SecretId });
    const reply = (status: number, payload: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(payload));
    };
    if (target !== 'secretsmanager.GetSecretValue') return reply(400, { __type: 'UnknownOperationException', message: `no ${target}` });
    if (SecretId?.endsWith(':denied'))
      return reply(400, { __type: 'AccessDeniedException', message: `not authorized to perform secretsmanager:GetSecretValue on ${SecretId}` });
    const value = this.secrets.get(SecretId ?? '');
    if (value === undefined) return reply(400, { __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." });
    reply(200, { ARN: SecretId, Name: 'floe-cluster', SecretString: value, VersionId: 'v1', VersionStages: ['AWSCURRENT'] });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

let sm: SecretsManagerStandIn;
beforeAll(async () => {
  sm = await SecretsManagerStandIn.start();
});
afterAll(() => sm.close());

const deployed = (overrides: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  [FloeEnv.AWS_REGION]: 'us-east-1',
  [FloeEnv.SECRETS_MANAGER_ENDPOINT]: sm.url,
  AWS_ACCESS_KEY_ID: 'test',
  AWS_SECRET_ACCESS_KEY: 'test',
  [FloeEnv.SECRET_ARN]: ARN,
  ...overrides,
});

describe('the cluster secret of the Dispatcher function', () => {
  it('is read from Secrets Manager by ARN (GetSecretValue) when the ARN is given, and each cold start reads the current value', async () => {
    sm.secrets.set(ARN, 'first-value');
    sm.requests.length = 0;
    expect(await resolveClusterSecret(deployed())).toBe('first-value');
    expect(sm.requests).toEqual([{ target: 'secretsmanager.GetSecretValue', secretId: ARN }]);
    // Rotation: a new value put into the secret is what the next cold start reads.
    sm.secrets.set(ARN, 'rotated-value');
    expect(await resolveClusterSecret(deployed())).toBe('rotated-value');
  });

  it('prefers the ARN to a value in the environment', async () => {
    sm.secrets.set(ARN, 'from-secrets-manager');
    expect(await resolveClusterSecret(deployed({ [FloeEnv.SECRET]: 'stale-value' }))).toBe('from-secrets-manager');
  });

  it('takes the value from FLOE_SECRET when no ARN is given (tests, emulators), without asking Secrets Manager', async () => {
    sm.requests.length = 0;
    const env = { [FloeEnv.SECRET]: 'test-secret' };
    expect(await resolveClusterSecret(env, secretsManagerReader(deployed()))).toBe('test-secret');
    expect(sm.requests).toEqual([]);
  });

  it('fails naming both variables when neither is set', async () => {
    await expect(resolveClusterSecret({})).rejects.toThrow(/neither FLOE_SECRET_ARN nor FLOE_SECRET is set/);
  });

  it('fails saying what to check when the role may not read the secret, or it does not exist', async () => {
    const denied = resolveClusterSecret(deployed({ [FloeEnv.SECRET_ARN]: `${ARN}:denied` }));
    await expect(denied).rejects.toThrow(
      /could not read the cluster secret .*:denied from Secrets Manager: .*not authorized.*check that the function's role may secretsmanager:GetSecretValue/,
    );
    await expect(resolveClusterSecret(deployed({ [FloeEnv.SECRET_ARN]: `${ARN}-gone` }))).rejects.toMatchObject({
      code: 'SECRET_UNAVAILABLE',
      retryable: true,
    });
  });
});
