// The CDK app's options from context (-c key=value): each reaches the stack, and a bad value fails the
// synth naming its key.
import { App, RemovalPolicy } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { CpuArchitecture } from 'aws-cdk-lib/aws-ecs';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stackPropsFromContext } from '../../cdk/lib/context.js';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import { ecrImageLocation } from '../../cdk/lib/image.js';

const from = (context: Record<string, unknown>) => stackPropsFromContext((key) => context[key]);

// The synth's output goes to a folder of this suite's, removed after it (an App without one leaves a
// cdk.out folder in the system's temp dir per run).
const outdir = mkdtempSync(join(tmpdir(), 'floe-cdk-context-'));
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

describe('the CDK app context', () => {
  it('has defaults without any context', () => {
    expect(from({})).toEqual({
      stackName: 'Floe',
      cluster: { removalPolicy: RemovalPolicy.RETAIN, cpuArchitecture: CpuArchitecture.ARM64, taskExecutorSpot: true },
    });
  });

  it('takes task sizes, architecture, VPC and subnets, image and retention from context, and they reach the template', () => {
    const props = from({
      'floe:stackName': 'Batch',
      'floe:cpuArchitecture': 'x86_64',
      'floe:spot': 'false',
      'floe:taskExecutorCpu': '2048',
      'floe:taskExecutorMemoryMiB': '8192',
      'floe:jobManagerCpu': 512,
      'floe:jobManagerMemoryMiB': 1024,
      'floe:image': 'public.ecr.aws/example/floe:1.2.3',
      'floe:logRetentionDays': '14',
      'floe:stagingRetentionDays': '3',
      'floe:vpcId': 'vpc-0abc',
      'floe:subnetIds': 'subnet-1, subnet-2',
    });
    expect(props).toMatchObject({ stackName: 'Batch', vpcId: 'vpc-0abc', subnetIds: ['subnet-1', 'subnet-2'] });
    const { stackName, vpcId: _vpcId, subnetIds: _subnetIds, ...stackProps } = props;
    // The VPC lookup needs an account; the rest is checked on a stack without it.
    const template = Template.fromStack(new FloeStack(new App({ outdir }), stackName, stackProps));
    template.hasResourceProperties('AWS::ECS::TaskDefinition', { Cpu: '2048', Memory: '8192', RuntimePlatform: { CpuArchitecture: 'X86_64' } });
    template.hasResourceProperties('AWS::ECS::TaskDefinition', {
      Cpu: '512',
      Memory: '1024',
      ContainerDefinitions: [{ Image: 'public.ecr.aws/example/floe:1.2.3' }],
    });
    template.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 14 });
    expect(JSON.stringify(template.toJSON())).toContain('"ExpirationInDays":3');
    template.hasOutput('ApiLogGroup', {});
  });

  it('grants the execution roles pull on the private ECR repository of a floe:image URI, and runs that exact image', () => {
    const uri = '123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/floe:1.2.3';
    const { stackName, ...stackProps } = from({ 'floe:image': uri });
    const template = Template.fromStack(new FloeStack(new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } }), stackName, stackProps));
    const resources = template.toJSON()['Resources'] as Record<string, { Type: string; Properties: Record<string, unknown> }>;
    const taskDefinitions = Object.values(resources).filter((r) => r.Type === 'AWS::ECS::TaskDefinition');
    expect(taskDefinitions).toHaveLength(2);
    for (const td of taskDefinitions) {
      expect((td.Properties['ContainerDefinitions'] as { Image: unknown }[])[0]!.Image).toBe(uri);
      const role = (td.Properties['ExecutionRoleArn'] as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      const granted = Object.values(resources)
        .filter((r) => r.Type === 'AWS::IAM::Policy' && (r.Properties['Roles'] as { Ref: string }[]).some((ref) => ref.Ref === role))
        .flatMap((p) => (p.Properties['PolicyDocument'] as { Statement: { Action: string | string[]; Resource: unknown }[] }).Statement);
      const repositoryArn = { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':ecr:eu-west-1:123456789012:repository/team/floe']] };
      expect(granted).toContainEqual(
        expect.objectContaining({ Action: ['ecr:BatchCheckLayerAvailability', 'ecr:GetDownloadUrlForLayer', 'ecr:BatchGetImage'], Resource: repositoryArn }),
      );
      expect(granted).toContainEqual(expect.objectContaining({ Action: 'ecr:GetAuthorizationToken', Resource: '*' }));
    }
    expect(() => from({ 'floe:image': '123456789012.dkr.ecr.eu-west-1.amazonaws.com' })).toThrow(
      /expected <account>\.dkr\.ecr\.<region>\.amazonaws\.com\/<repository>/,
    );
    expect(ecrImageLocation(`123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/floe@sha256:${'ab'.repeat(32)}`)).toEqual({
      account: '123456789012',
      region: 'eu-west-1',
      repositoryName: 'team/floe',
    });
    expect(ecrImageLocation('public.ecr.aws/example/floe:1.2.3')).toBeUndefined();
  });

  it("reserves the Dispatcher function's concurrency only when floe:apiReservedConcurrency asks", () => {
    const reserved = (context: Record<string, unknown>): unknown => {
      const { stackName, ...stackProps } = from(context);
      const fns = Template.fromStack(new FloeStack(new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } }), stackName, stackProps)).findResources(
        'AWS::Lambda::Function',
        { Properties: { Description: 'Floe Dispatcher: the REST API' } },
      );
      return Object.values(fns)[0]?.['Properties']?.['ReservedConcurrentExecutions'];
    };
    expect(reserved({})).toBeUndefined();
    expect(reserved({ 'floe:apiReservedConcurrency': '10' })).toBe(10);
    expect(() => from({ 'floe:apiReservedConcurrency': '0' })).toThrow(/context floe:apiReservedConcurrency must be a whole number above 0/);
  });

  it("builds the image for the tasks' architecture: linux/arm64 by default, linux/amd64 with floe:cpuArchitecture=x86_64", () => {
    const platforms = (context: Record<string, unknown>): string[] => {
      const { stackName, ...stackProps } = from(context);
      const app = new App({ outdir: mkdtempSync(join(outdir, 'arch-')), context: { 'aws:cdk:bundling-stacks': [] } });
      new FloeStack(app, stackName, stackProps);
      const assembly = app.synth();
      const manifest = JSON.parse(readFileSync(join(assembly.directory, `${stackName}.assets.json`), 'utf8')) as {
        dockerImages: Record<string, { source: { platform?: string } }>;
      };
      return Object.values(manifest.dockerImages).map((image) => image.source.platform ?? 'none');
    };
    expect(platforms({})).toEqual(['linux/arm64']);
    expect(platforms({ 'floe:cpuArchitecture': 'x86_64' })).toEqual(['linux/amd64']);
    // A prebuilt image is run as it is: nothing is built.
    expect(platforms({ 'floe:image': '123456789012.dkr.ecr.eu-west-1.amazonaws.com/floe:1.2.3' })).toEqual([]);
  });

  it('fails naming the key of a value it does not take', () => {
    expect(() => from({ 'floe:cpuArchitecture': 'sparc' })).toThrow(/context floe:cpuArchitecture must be 'arm64' or 'x86_64', found 'sparc'/);
    expect(() => from({ 'floe:taskExecutorCpu': '-1' })).toThrow(/context floe:taskExecutorCpu must be a whole number above 0/);
    expect(() => from({ 'floe:logRetentionDays': '12' })).toThrow(/context floe:logRetentionDays must be one of CloudWatch's retention periods/);
    expect(() => from({ 'floe:subnetIds': 'subnet-1' })).toThrow(/floe:subnetIds needs floe:vpcId/);
    expect(() => from({ 'floe:config': '[1]' })).toThrow(/context floe:config must be a JSON object/);
    expect(() => from({ 'floe:warmPoolTaskManagers': 'many' })).toThrow(/context floe:warmPoolTaskManagers must be a whole number, 0 or more/);
  });

  it('takes the warm pool from context; 0 JobManagers turns it off', () => {
    expect(from({ 'floe:warmPoolJobManagers': '0' }).cluster?.warmPool).toEqual({ jobManagers: 0 });
    const pool = from({ 'floe:warmPoolJobManagers': '2', 'floe:warmPoolTaskManagers': 4, 'floe:warmPoolIdleSeconds': '300' }).cluster?.warmPool;
    expect(pool).toMatchObject({ jobManagers: 2, taskManagers: 4 });
    expect(pool?.idleTimeout?.toSeconds()).toBe(300);
  });
});
