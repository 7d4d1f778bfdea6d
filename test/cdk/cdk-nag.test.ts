// cdk-nag's AWS Solutions rules over the synthesized Floe app: no error left unacknowledged, and every
// acknowledgement carries its reason.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Aspects } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import { packageRoot } from '../../runtime/core/paths.js';

const outdir = mkdtempSync(join(tmpdir(), 'floe-cdk-nag-'));
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

describe('cdk-nag AwsSolutionsChecks over the Floe app', () => {
  let stack: FloeStack;

  beforeAll(() => {
    const cdkDir = join(packageRoot, 'cdk');
    const cdkJson = JSON.parse(readFileSync(join(cdkDir, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
    const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Record<string, unknown>;
    const app = new App({ outdir, builtinCloudFormationValidation: false, context: { ...cdkJson.context, ...committed, 'aws:cdk:bundling-stacks': [] } });
    stack = new FloeStack(app, 'Floe', { env: { account: '123456789012', region: 'us-east-1' } });
    Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
  });

  it('reports no error that is not acknowledged', () => {
    const errors = Annotations.fromStack(stack).findError('*', Match.stringLikeRegexp('AwsSolutions-.*'));
    expect(errors.map((e) => `${e.id}: ${String(e.entry.data).split('\n')[0]}`)).toEqual([]);
  });

  it('acknowledges only the rules the README explains, each with its reason', () => {
    const resources = Template.fromStack(stack).toJSON()['Resources'] as Record<string, { Metadata?: { cdk_nag?: { rules_to_suppress: { id: string; reason: string }[] } } }>;
    const acknowledged = Object.values(resources).flatMap((r) => r.Metadata?.cdk_nag?.rules_to_suppress ?? []);
    for (const rule of acknowledged) expect(rule.reason.length, rule.id).toBeGreaterThan(40);
    expect([...new Set(acknowledged.map((r) => r.id))].sort()).toEqual(
      ['AwsSolutions-APIG4', 'AwsSolutions-ECS2', 'AwsSolutions-ECS4', 'AwsSolutions-IAM5', 'AwsSolutions-S1', 'AwsSolutions-SMG4', 'AwsSolutions-VPC7'].sort(),
    );
  });
});
