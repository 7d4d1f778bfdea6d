// `cdk synth` through the real CLI, offline: the app in cdk.json builds, the Lambda is bundled with
// local esbuild, the image context is staged without Docker, and no AWS call or lookup is needed. Run
// twice: with an account and region, and with neither (what a machine without credentials synthesizes).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContainerImageSpec } from '../../cdk/lib/runtime-contract.js';
import { packageRoot } from '../../runtime/core/paths.js';

const SYNTH_TIMEOUT_MS = 120_000;

interface Synth {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function cliEnv(home: string, bound: boolean): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // No credentials and no profile: the CLI must not be able to call AWS at all.
  for (const name of Object.keys(env)) if (name.startsWith('AWS_') || name.startsWith('CDK_')) delete env[name];
  return {
    ...env,
    HOME: home,
    AWS_EC2_METADATA_DISABLED: 'true',
    // The example account whose availability zones cdk.context.json holds.
    ...(bound ? { AWS_REGION: 'us-east-1', CDK_DEFAULT_ACCOUNT: '123456789012' } : {}),
    CDK_DISABLE_VERSION_CHECK: 'true',
    CDK_DISABLE_CLI_TELEMETRY: 'true',
    CI: 'true',
    // The Lambda bundling runs esbuild through npx; no registry check for a newer npm.
    npm_config_update_notifier: 'false',
  };
}

function cdkSynth(work: string, outdir: string, bound: boolean): Promise<Synth> {
  return new Promise<Synth>((resolve) => {
    execFile(
      process.execPath,
      [join(packageRoot, 'node_modules/aws-cdk/bin/cdk'), 'synth', '--quiet', '--no-notices', '--output', outdir],
      { cwd: join(packageRoot, 'cdk'), env: cliEnv(work, bound), timeout: SYNTH_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr }),
    );
  });
}

/** Rule, resource and compliance of each row of the report cdk-nag writes beside the template. */
function nagReport(outdir: string): { rule: string; resource: string; compliance: string }[] {
  const lines = readFileSync(join(outdir, 'AwsSolutions-Floe-NagReport.csv'), 'utf8')
    .split('\n')
    .slice(1)
    .filter((l) => l !== '');
  return lines.map((line) => {
    const m = /^"([^"]*)","([^"]*)","([^"]*)"/.exec(line);
    expect(m, line).not.toBeNull();
    return { rule: m![1]!, resource: m![2]!, compliance: m![3]! };
  });
}

describe('cdk synth (the CLI, offline)', () => {
  const work = mkdtempSync(join(tmpdir(), 'floe-cdk-synth-'));
  const outdir = join(work, 'cdk.out');
  const agnosticOutdir = join(work, 'cdk.out.agnostic');
  let synth: Synth;
  let agnostic: Synth;

  beforeAll(
    async () => {
      // One after the other: each bundles the Lambda and stages the image context.
      synth = await cdkSynth(work, outdir, true);
      agnostic = await cdkSynth(work, agnosticOutdir, false);
    },
    2 * SYNTH_TIMEOUT_MS + 10_000,
  );

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  const manifest = (): {
    files: Record<string, { source: { path: string } }>;
    dockerImages: Record<string, { source: { directory: string; dockerFile: string; platform: string } }>;
  } => JSON.parse(readFileSync(join(outdir, 'Floe.assets.json'), 'utf8'));

  it('exits 0 and writes the Floe stack with no missing context', () => {
    expect(synth.code, `cdk synth failed:\n${synth.stderr}\n${synth.stdout}`).toBe(0);
    const template = JSON.parse(readFileSync(join(outdir, 'Floe.template.json'), 'utf8')) as {
      Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }>;
    };
    const fns = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function' && r.Properties?.['Runtime'] === 'nodejs24.x');
    expect(fns).toHaveLength(1);
    const assembly = JSON.parse(readFileSync(join(outdir, 'manifest.json'), 'utf8')) as {
      missing?: unknown[];
      artifacts: Record<string, { environment?: string }>;
    };
    // Nothing left to look up: cdk.context.json answers the VPC's availability zones.
    expect(assembly.missing ?? []).toEqual([]);
    expect(assembly.artifacts['Floe']?.environment).toBe('aws://123456789012/us-east-1');
  });

  it('exits 0 without credentials, account or region, writing an environment-agnostic stack', () => {
    expect(agnostic.code, `cdk synth failed:\n${agnostic.stderr}\n${agnostic.stdout}`).toBe(0);
    const assembly = JSON.parse(readFileSync(join(agnosticOutdir, 'manifest.json'), 'utf8')) as {
      missing?: unknown[];
      artifacts: Record<string, { environment?: string }>;
    };
    expect(assembly.missing ?? []).toEqual([]);
    expect(assembly.artifacts['Floe']?.environment).toBe('aws://unknown-account/unknown-region');
  });

  it('runs cdk-nag in every synth, which finds nothing unacknowledged with or without an account and region', () => {
    for (const [dir, run] of [
      [outdir, synth],
      [agnosticOutdir, agnostic],
    ] as const) {
      const rows = nagReport(dir);
      // The checks ran over the whole stack: the IAM, API, ECS and S3 rules among them.
      for (const rule of ['AwsSolutions-IAM5', 'AwsSolutions-APIG4', 'AwsSolutions-ECS2', 'AwsSolutions-S1'])
        expect(
          rows.map((r) => r.rule),
          dir,
        ).toContain(rule);
      expect(
        rows.filter((r) => r.compliance !== 'Compliant' && r.compliance !== 'Suppressed' && r.compliance !== 'N/A'),
        dir,
      ).toEqual([]);
      expect(`${run.stdout}\n${run.stderr}`).not.toMatch(/AwsSolutions-/);
    }
  });

  it('prints no warning about the template, W3011 (UpdateReplacePolicy without DeletionPolicy) included', () => {
    for (const run of [synth, agnostic]) {
      const output = `${run.stdout}\n${run.stderr}`;
      expect(output).not.toMatch(/W3011|^\s*WARNING/m);
    }
  });

  it('bundles the Lambda handler locally with esbuild into one ES module that carries its AWS SDK', () => {
    const files = Object.values(manifest().files).filter((f) => f.source.path.startsWith('asset.'));
    expect(files).toHaveLength(1);
    const dir = join(outdir, files[0]!.source.path);
    expect(readdirSync(dir).sort()).toEqual(['dashboard', 'index.mjs', 'index.mjs.map']);
    // The dashboard the function serves at '/': its page and every file the page names.
    const page = readFileSync(join(dir, 'dashboard', 'index.html'), 'utf8');
    const named = [...page.matchAll(/(?:src|href)="(assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThanOrEqual(2);
    for (const file of named) expect(existsSync(join(dir, 'dashboard', file)), file).toBe(true);
    const code = readFileSync(join(dir, 'index.mjs'), 'utf8');
    expect(code).toContain('createRequire');
    expect(code).not.toMatch(/from\s*["']@aws-sdk\//);
    expect(code).toMatch(/export\s*\{[^}]*\bhandler\b/);
  });

  it('stages the image context from the repository root with the Dockerfile and without local build output', () => {
    const images = Object.values(manifest().dockerImages);
    expect(images).toHaveLength(1);
    const image = images[0]!;
    expect(image.source.dockerFile).toBe(ContainerImageSpec.dockerfile);
    expect(image.source.platform).toBe('linux/arm64');
    const context = join(outdir, image.source.directory);
    for (const present of [ContainerImageSpec.dockerfile, 'package.json', 'package-lock.json', 'runtime/build.mjs']) {
      expect(existsSync(join(context, present)), present).toBe(true);
    }
    for (const absent of ['node_modules', '.git', 'dist', '.floe', 'cdk/cdk.out']) {
      expect(existsSync(join(context, absent)), absent).toBe(false);
    }
  });
});
