// Job credentials on the emulators: the JobManager's vendor assumes the job-data role through STS with the
// job's session policy, a task's S3 stores sign with what it vended (a key S3 takes where the process's own
// is refused), and a vendor that cannot assume the role, or a job naming too many paths, fails with a
// named error that says what to do.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleJobFile, importLibrary } from '../../runtime/api/library.js';
import { loadJobDefinition } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { jobCredentialsVendorFromEnv, JOB_DATA_SESSION_SECONDS } from '../../runtime/aws/job-credentials.js';
import { jobSessionPolicy } from '../../runtime/aws/job-session-policy.js';
import { s3OutputStoreFromEnv } from '../../runtime/aws/s3-output-store.js';
import { FloeError } from '../../runtime/core/errors.js';
import { JobId } from '../../runtime/core/ids.js';
import { packageRoot } from '../../runtime/core/paths.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { startEmulators, type Emulators } from './emulators.js';
import { StsEmulator } from './sts-emulator.js';

const ROLE = 'arn:aws:iam::000000000000:role/job-data';
let emulators: Emulators;
let sts: StsEmulator;
let dir: string;
let jobGraph: JobGraph;

beforeAll(async () => {
  emulators = await startEmulators({ dynamodb: false });
  sts = await StsEmulator.start({ roleArns: [ROLE] });
  dir = mkdtempSync(join(tmpdir(), 'floe-job-credentials-'));
  const { code, sha256 } = await bundleJobFile(join(packageRoot, 'test/fixtures/jobs/e2e-words.ts'));
  const definition = loadJobDefinition(await importLibrary(code, join(dir, 'cache')), 'default');
  jobGraph = buildJobGraph(definition, {
    jobId: JobId.random(),
    args: [`s3://${emulators.bucket}/in/words.txt`, `s3://${emulators.bucket}/out/words`],
    exportName: 'default',
    library: { sha256, sizeBytes: code.length },
    defaultParallelism: 2,
  });
}, 120_000);

afterAll(async () => {
  await sts?.close();
  await emulators?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** The JobManager's environment on the emulators, its own key included. */
const jobManagerEnv = (roleArn: string): NodeJS.ProcessEnv => ({
  FLOE_AWS_REGION: emulators.region,
  FLOE_BUCKET: emulators.bucket,
  FLOE_BLOB_PREFIX: 'floe/',
  FLOE_JOB_DATA_ROLE_ARN: roleArn,
  FLOE_STS_ENDPOINT: sts.endpoint,
  AWS_ACCESS_KEY_ID: emulators.credentials.accessKeyId,
  AWS_SECRET_ACCESS_KEY: emulators.credentials.secretAccessKey,
});

describe('job credentials (STS emulator, s3rver)', () => {
  it("assumes the job-data role with the job's session policy for an hour, and a task's store writes its staging with them", async () => {
    const vendor = jobCredentialsVendorFromEnv(jobManagerEnv(ROLE))!;
    const before = Date.now();
    const credentials = await vendor.credentialsFor(jobGraph);
    const session = sts.sessions.at(-1)!;
    expect(session).toMatchObject({
      roleArn: ROLE,
      roleSessionName: `floe-job-${jobGraph.jobId}`,
      durationSeconds: JOB_DATA_SESSION_SECONDS,
      accessKeyId: credentials.accessKeyId,
      sessionToken: credentials.sessionToken,
    });
    expect(session.policy).toEqual(jobSessionPolicy(jobGraph, { bucket: emulators.bucket, blobPrefix: 'floe/' }));
    expect(credentials.expirationMs).toBeGreaterThanOrEqual(before + 3_599_000);

    // A TaskExecutor's own key is one S3 refuses; the vended one it takes.
    const part = join(dir, 'part');
    writeFileSync(part, 'WORDS\n');
    const staging = `s3://${emulators.bucket}/out/words/.floe-staging-${jobGraph.jobId}/a0`;
    const env = { FLOE_AWS_REGION: emulators.region, FLOE_S3_ENDPOINT: emulators.awsConfig('s3').endpoint! };
    const own = s3OutputStoreFromEnv(env, { accessKeyId: 'AKIATASKEXECUTORNOS3', secretAccessKey: 'not-a-key-s3-knows' });
    await expect(own.uploadPart(staging, 0, part)).rejects.toMatchObject({ name: 'InvalidAccessKeyId' });
    const vended = s3OutputStoreFromEnv(env, credentials);
    expect(await vended.uploadPart(staging, 0, part)).toMatchObject({ size: 6 });
  });

  it('fails with JOB_CREDENTIALS naming the role and what the JobManager role needs when the role cannot be assumed', async () => {
    const other = 'arn:aws:iam::000000000000:role/not-trusting-the-jobmanager';
    const failed = await jobCredentialsVendorFromEnv(jobManagerEnv(other))!
      .credentialsFor(jobGraph)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(failed).toBeInstanceOf(FloeError);
    expect(failed).toMatchObject({ code: 'JOB_CREDENTIALS', retryable: false });
    expect((failed as Error).message).toContain(`cannot vend S3 credentials for job ${jobGraph.jobId}: AssumeRole of '${other}' failed (AccessDenied`);
    expect((failed as Error).message).toContain("expected the JobManager's role to be trusted by that role and allowed sts:AssumeRole on it");
  });

  it('refuses a job whose S3 paths make a session policy STS would refuse, saying how to narrow it', () => {
    const source = jobGraph.vertices[0]!.operators[0]!;
    const many: JobGraph = {
      ...jobGraph,
      // The same source vertex reading 60 files one by one.
      vertices: [
        ...jobGraph.vertices,
        ...Array.from({ length: 60 }, (_, i) => ({
          ...jobGraph.vertices[0]!,
          id: `extra-${i}`,
          operators: [{ ...source, path: `s3://${emulators.bucket}/in/day-${String(i).padStart(3, '0')}/words.txt` }],
        })),
      ] as JobGraph['vertices'],
    };
    expect(() => jobSessionPolicy(many, { bucket: emulators.bucket, blobPrefix: 'floe/' })).toThrow(
      /reads 61 S3 paths and writes 1 S3 targets: the session policy that confines its tasks to them takes \d+ characters, STS accepts at most 2048; read fewer, wider prefixes/,
    );
  });
});
