// cdk-nag's AWS Solutions rules over the synthesized Floe app, as the CDK app applies them (cdk/bin/floe.ts):
// no error left unacknowledged whether the stack is environment-agnostic (a synth without credentials) or
// bound to an account and region, and every acknowledgement names its resource, its wildcard and its reason.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Aspects } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stackPropsFromContext } from '../../cdk/lib/context.js';
import { FloeStack, type FloeStackProps } from '../../cdk/lib/floe-stack.js';
import { packageRoot } from '../../runtime/core/paths.js';

const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

interface Acknowledgement {
  readonly id: string;
  readonly reason: string;
  readonly applies_to?: (string | { regex: string })[];
}
type Resources = Record<string, { Type: string; Properties?: Record<string, unknown>; Metadata?: { cdk_nag?: { rules_to_suppress: Acknowledgement[] } } }>;

/** The Floe stack as the CDK app builds it from `context`, with the app's checks applied. */
function nagged(stackProps: Omit<FloeStackProps, 'env'>, env?: { account: string; region: string }): FloeStack {
  const cdkDir = join(packageRoot, 'cdk');
  const cdkJson = JSON.parse(readFileSync(join(cdkDir, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> };
  const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Record<string, unknown>;
  const outdir = mkdtempSync(join(tmpdir(), 'floe-cdk-nag-'));
  outdirs.push(outdir);
  const app = new App({ outdir, builtinCloudFormationValidation: false, context: { ...cdkJson.context, ...committed, 'aws:cdk:bundling-stacks': [] } });
  const stack = new FloeStack(app, 'Floe', { ...stackProps, ...(env !== undefined ? { env } : {}) });
  Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
  return stack;
}

const fromContext = (context: Record<string, string>): Omit<FloeStackProps, 'env'> => {
  const { stackName: _name, ...props } = stackPropsFromContext((key) => context[key]);
  return props;
};

/** Findings cdk-nag left unacknowledged at `level`, as `<path>: <rule>[<finding>]: <first line>`. */
const unacknowledged = (annotations: Annotations, level: 'error' | 'warning'): string[] =>
  (level === 'error'
    ? annotations.findError('*', Match.stringLikeRegexp('AwsSolutions-.*'))
    : annotations.findWarning('*', Match.stringLikeRegexp('AwsSolutions-.*'))
  ).map((e) => `${e.id}: ${String(e.entry.data).split('\n')[0]}`);

const acknowledgementsOf = (resources: Resources): [string, Resources[string], Acknowledgement][] =>
  Object.entries(resources).flatMap(([id, r]) =>
    (r.Metadata?.cdk_nag?.rules_to_suppress ?? []).map((a): [string, Resources[string], Acknowledgement] => [id, r, a]),
  );

describe('cdk-nag AwsSolutionsChecks over the Floe app', () => {
  // Each stack is synthesized once (a second synth would run the app's aspects again).
  const synths: Record<string, { annotations: Annotations; resources: Resources }> = {};

  beforeAll(() => {
    const bound = { account: '123456789012', region: 'us-east-1' };
    const stacks = {
      // What `cdk synth` without credentials builds: no account, no region.
      'no environment': nagged(fromContext({})),
      'account and region': nagged(fromContext({}), bound),
      // A prebuilt image in a private ECR repository of another region.
      'a private ECR image': nagged(fromContext({ 'floe:image': '123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/floe:1.2.3' }), bound),
    };
    for (const [name, stack] of Object.entries(stacks)) {
      const annotations = Annotations.fromStack(stack);
      synths[name] = { annotations, resources: Template.fromStack(stack).toJSON()['Resources'] as Resources };
    }
  });

  it.each(['no environment', 'account and region', 'a private ECR image'])('reports no error and no warning that is not acknowledged (%s)', (name) => {
    const { annotations } = synths[name]!;
    expect(unacknowledged(annotations, 'error')).toEqual([]);
    expect(unacknowledged(annotations, 'warning')).toEqual([]);
  });

  it('acknowledges only the rules the README explains, each with its reason, and wildcards by their exact text', () => {
    for (const { resources } of Object.values(synths)) {
      const acknowledged = acknowledgementsOf(resources);
      for (const [, , rule] of acknowledged) {
        expect(rule.reason.length, rule.id).toBeGreaterThan(40);
        // No pattern: each acknowledged wildcard is spelled out as cdk-nag reports it.
        for (const target of rule.applies_to ?? []) expect(typeof target, `${rule.id} ${JSON.stringify(target)}`).toBe('string');
      }
      expect([...new Set(acknowledged.map(([, , r]) => r.id))].sort()).toEqual(
        [
          'AwsSolutions-APIG4',
          'AwsSolutions-ECS2',
          'AwsSolutions-ECS4',
          'AwsSolutions-IAM5',
          'AwsSolutions-S1',
          'AwsSolutions-SMG4',
          'AwsSolutions-VPC7',
        ].sort(),
      );
      // IAM5 always names the wildcards it acknowledges; never a blanket over a role.
      for (const [, , rule] of acknowledged.filter(([, , r]) => r.id === 'AwsSolutions-IAM5')) expect(rule.applies_to?.length, rule.reason).toBeGreaterThan(0);
    }
  });

  it('acknowledges APIG4 on each open route by itself, with what the route serves, and on nothing else', () => {
    for (const { resources } of Object.values(synths)) {
      const apig4 = acknowledgementsOf(resources).filter(([, , r]) => r.id === 'AwsSolutions-APIG4');
      const openRoutes = Object.entries(resources).filter(([, r]) => r.Type === 'AWS::ApiGatewayV2::Route' && r.Properties?.['AuthorizationType'] === 'NONE');
      expect(openRoutes.length).toBeGreaterThan(0);
      expect(apig4.map(([id]) => id).sort()).toEqual(openRoutes.map(([id]) => id).sort());
      const reasonOf = (routeKey: string): string => apig4.find(([, r]) => r.Properties?.['RouteKey'] === routeKey)![2].reason;
      expect(reasonOf('GET /')).toMatch(/page and its static files/);
      expect(reasonOf('GET /login')).toMatch(/trades a code that an IAM-authorized call \(floe dashboard\) issued, once/);
      expect(reasonOf('POST /login')).toMatch(/refuses every secret/);
      expect(reasonOf('POST /ui/login')).toBe(reasonOf('POST /login'));
      expect(reasonOf('POST /logout')).toMatch(/only clears the browser's session cookie/);
      expect(reasonOf('GET /ui/{proxy+}')).toMatch(/reads .* only to a live dashboard session/);
      expect(reasonOf('PATCH /ui/jobs/{id}')).toMatch(/cancel button .* only to a live dashboard session/);
      // The IAM-authorized catch-all route needs no acknowledgement.
      const signed = Object.values(resources).filter((r) => r.Type === 'AWS::ApiGatewayV2::Route' && r.Properties?.['AuthorizationType'] === 'AWS_IAM');
      expect(signed.map((r) => r.Properties?.['RouteKey'])).toEqual(['ANY /{proxy+}']);
    }
  });

  it('acknowledges a wildcard resource (Resource::*) only on roles whose every such statement is the one the reason names', () => {
    for (const { resources } of Object.values(synths)) {
      const roleOf = (arn: unknown): string => (arn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      const taskDefinitions = Object.values(resources).filter((r) => r.Type === 'AWS::ECS::TaskDefinition');
      expect(taskDefinitions).toHaveLength(2);
      const apiRole = roleOf(
        Object.values(resources).find((r) => r.Type === 'AWS::Lambda::Function' && r.Properties?.['Description'] === 'Floe Dispatcher: the REST API')!
          .Properties!['Role'],
      );
      const jobManagerRole = roleOf(
        taskDefinitions.find((td) => JSON.stringify(td.Properties!['ContainerDefinitions']).includes('jobmanager.js'))!.Properties!['TaskRoleArn'],
      );
      const expected: Record<string, string> = {
        // The image pull's token: IAM scopes it to no resource.
        ...Object.fromEntries(taskDefinitions.map((td) => [roleOf(td.Properties!['ExecutionRoleArn']), 'ecr:GetAuthorizationToken'])),
        // ListTasks names no task: scoped by the ecs:cluster condition instead.
        [apiRole]: 'ecs:ListTasks',
        [jobManagerRole]: 'ecs:ListTasks',
      };
      const acknowledging = acknowledgementsOf(resources)
        .filter(([, , a]) => a.id === 'AwsSolutions-IAM5' && (a.applies_to ?? []).includes('Resource::*'))
        .map(([id, r]) => (r.Type === 'AWS::IAM::Policy' ? (r.Properties!['Roles'] as { Ref: string }[])[0]!.Ref : id));
      expect([...new Set(acknowledging)].sort()).toEqual(Object.keys(expected).sort());
      for (const [role, action] of Object.entries(expected)) {
        const policies = Object.values(resources).filter(
          (r) => r.Type === 'AWS::IAM::Policy' && (r.Properties!['Roles'] as { Ref: string }[]).some((ref) => ref.Ref === role),
        );
        const anywhere = policies
          .flatMap((p) => (p.Properties!['PolicyDocument'] as { Statement: { Action: string | string[]; Resource: unknown; Condition?: unknown }[] }).Statement)
          .filter((s) => s.Resource === '*');
        expect(
          anywhere.map((s) => s.Action),
          role,
        ).toEqual([action]);
        if (action === 'ecs:ListTasks') expect(anywhere[0]!.Condition, role).toMatchObject({ ArnEquals: { 'ecs:cluster': expect.anything() } });
      }
    }
  });
});
