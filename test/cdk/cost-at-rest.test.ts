// What the default stack costs while no job runs: every resource billed by the hour or month regardless
// of use must be listed, with its reason and price, in the README's "Cost at rest" table.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, describe, expect, it } from 'vitest';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import { packageRoot } from '../../runtime/core/paths.js';

type Resource = { Type: string; Properties?: Record<string, unknown> };

/** The README's name for each resource that bills while idle, or undefined when it bills per use only. */
function billedAtRest(r: Resource): string | undefined {
  const p = r.Properties ?? {};
  switch (r.Type) {
    case 'AWS::EC2::NatGateway':
      return 'NAT gateway';
    case 'AWS::EC2::VPCEndpoint':
      return p['VpcEndpointType'] === 'Gateway' ? undefined : 'Interface VPC endpoint';
    case 'AWS::EC2::EIP':
      return 'Elastic IP address';
    case 'AWS::ElasticLoadBalancingV2::LoadBalancer':
    case 'AWS::ElasticLoadBalancing::LoadBalancer':
      return 'Load balancer';
    case 'AWS::ECS::Service':
      return 'ECS service';
    case 'AWS::EC2::Instance':
    case 'AWS::AutoScaling::AutoScalingGroup':
      return 'EC2 instances';
    case 'AWS::DynamoDB::Table':
    case 'AWS::DynamoDB::GlobalTable':
      return p['BillingMode'] === 'PAY_PER_REQUEST' ? undefined : 'DynamoDB provisioned capacity';
    case 'AWS::Lambda::Alias':
    case 'AWS::Lambda::Version':
      return p['ProvisionedConcurrencyConfig'] !== undefined ? 'Lambda provisioned concurrency' : undefined;
    case 'AWS::KMS::Key':
      return 'KMS customer key';
    case 'AWS::SecretsManager::Secret':
      return 'Secrets Manager secret';
    case 'AWS::CloudWatch::Alarm':
    case 'AWS::CloudWatch::CompositeAlarm':
      return 'CloudWatch alarm';
    case 'AWS::CloudWatch::Dashboard':
      return 'CloudWatch dashboard';
    case 'AWS::EC2::FlowLog':
      return 'VPC flow logs';
    case 'AWS::Route53::HostedZone':
      return 'Route 53 hosted zone';
    case 'AWS::ECS::Cluster': {
      const settings = (p['ClusterSettings'] as { Name: string; Value: string }[] | undefined) ?? [];
      return settings.some((s) => s.Name === 'containerInsights' && s.Value !== 'disabled') ? 'Container Insights' : undefined;
    }
    case 'AWS::Events::Rule':
      // A schedule invokes its target whether or not a job runs.
      return p['ScheduleExpression'] !== undefined ? 'Reconcile schedule' : undefined;
    default:
      return undefined;
  }
}

/** Resource names in the first column of the README's "Cost at rest" table. */
function readmeCostTable(): string[] {
  const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');
  const section = readme.split(/^#### Cost at rest$/m)[1];
  expect(section, 'README.md has a "#### Cost at rest" section').toBeDefined();
  const rows = section!.split('\n\n').find((block) => block.trimStart().startsWith('|'))!.split('\n').slice(2);
  return rows.map((row) => row.split('|')[1]!.trim()).filter((name) => name !== '' && !name.startsWith('**'));
}

describe('the default stack at rest', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'floe-cdk-cost-'));
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  it('bills by the hour or month only for what the README lists and justifies', () => {
    const cdkDir = join(packageRoot, 'cdk');
    const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Record<string, unknown>;
    const app = new App({ outdir, builtinCloudFormationValidation: false, context: { ...committed, 'aws:cdk:bundling-stacks': [] } });
    const stack = new FloeStack(app, 'Floe', { env: { account: '123456789012', region: 'us-east-1' } });
    const resources = Object.values(Template.fromStack(stack).toJSON()['Resources'] as Record<string, Resource>);
    const atRest = [...new Set(resources.map(billedAtRest).filter((name): name is string => name !== undefined))].sort();
    expect(atRest).toEqual(['Reconcile schedule', 'Secrets Manager secret']);
    expect(readmeCostTable().sort()).toEqual(atRest);
  });
});
