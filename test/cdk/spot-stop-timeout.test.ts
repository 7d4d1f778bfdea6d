// Spot in the template: a TaskExecutor's container gets Fargate's longest stop timeout (120 s), the
// window between the SIGTERM of a Spot interruption (or a scale-in) and SIGKILL in which it drains, and
// its drain deadline ('taskmanager.drain.timeout') ends inside it; a JobManager keeps 30 s.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, describe, expect, it } from 'vitest';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import { ContainerImageSpec } from '../../cdk/lib/runtime-contract.js';
import { CONFIG_OPTIONS } from '../../runtime/core/config.js';
import { packageRoot } from '../../runtime/core/paths.js';

type Json = Record<string, unknown>;
const outdirs: string[] = [];
afterAll(() => outdirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function template(): Template {
  const cdkDir = join(packageRoot, 'cdk');
  const cdkJson = JSON.parse(readFileSync(join(cdkDir, 'cdk.json'), 'utf8')) as { context?: Json };
  const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Json;
  const outdir = mkdtempSync(join(tmpdir(), 'floe-cdk-spot-'));
  outdirs.push(outdir);
  const app = new App({ outdir, builtinCloudFormationValidation: false, context: { ...cdkJson.context, ...committed, 'aws:cdk:bundling-stacks': [] } });
  return Template.fromStack(new FloeStack(app, 'Floe', { env: { account: '123456789012', region: 'us-east-1' } }));
}

describe('stop timeouts of the task definitions', () => {
  it('gives a TaskExecutor 120 s between SIGTERM and SIGKILL, longer than its drain, and a JobManager 30 s', () => {
    const definitions = Object.values(template().findResources('AWS::ECS::TaskDefinition')) as { Properties: { ContainerDefinitions: Json[] } }[];
    const containerRunning = (command: readonly string[]): Json => {
      const found = definitions.map((d) => d.Properties.ContainerDefinitions[0]!).filter((c) => JSON.stringify(c['Command']) === JSON.stringify(command));
      expect(found, `one container running ${command.join(' ')}`).toHaveLength(1);
      return found[0]!;
    };
    const taskExecutor = containerRunning(ContainerImageSpec.taskExecutorCommand);
    const jobManager = containerRunning(ContainerImageSpec.jobManagerCommand);
    expect(taskExecutor['StopTimeout']).toBe(120);
    expect(jobManager['StopTimeout']).toBe(30);
    expect(CONFIG_OPTIONS.taskManagerDrainTimeoutMs.default).toBeLessThan((taskExecutor['StopTimeout'] as number) * 1000);
  });
});
