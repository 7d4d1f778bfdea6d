// Operations in the template: the optional alarms (-c floe:alarms=true: the dead-letter queue not empty,
// each function's errors and throttles, mailed through SNS with -c floe:alarmEmail; none without the flag,
// since each bills by the month), and the grant that lets RunTask tag the tasks it starts.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Aspects, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, describe, expect, it } from 'vitest';
import * as sns from 'aws-cdk-lib/aws-sns';
import { stackPropsFromContext } from '../../cdk/lib/context.js';
import { FloeAlarms } from '../../cdk/lib/floe-alarms.js';
import { FloeStack } from '../../cdk/lib/floe-stack.js';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { JOB_ENDED_EVENT } from '../../runtime/aws/job-metrics.js';
import { packageRoot } from '../../runtime/core/paths.js';

type Json = Record<string, unknown>;
const outdirs: string[] = [];
afterAll(() => outdirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The stack `cdk synth -c …` builds from this context, with cdk-nag applied as in the app. */
function synth(context: Record<string, string>): { stack: FloeStack; template: Template; nagErrors: string[] } {
  const cdkDir = join(packageRoot, 'cdk');
  const cdkJson = JSON.parse(readFileSync(join(cdkDir, 'cdk.json'), 'utf8')) as { context?: Json };
  const committed = JSON.parse(readFileSync(join(cdkDir, 'cdk.context.json'), 'utf8')) as Json;
  const outdir = mkdtempSync(join(tmpdir(), 'floe-cdk-alarms-'));
  outdirs.push(outdir);
  const app = new App({ outdir, builtinCloudFormationValidation: false, context: { ...cdkJson.context, ...committed, 'aws:cdk:bundling-stacks': [] } });
  const { stackName, ...props } = stackPropsFromContext((key) => context[key]);
  const stack = new FloeStack(app, stackName, { env: { account: '123456789012', region: 'us-east-1' }, ...props });
  Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
  // Annotations first: it synthesizes the app, and Template reads that synthesis.
  const nagErrors = Annotations.fromStack(stack)
    .findError('*', Match.stringLikeRegexp('AwsSolutions-.*'))
    .map((e) => `${e.id}: ${String(e.entry.data).split('\n')[0]}`);
  return { stack, template: Template.fromStack(stack), nagErrors };
}

type Alarm = {
  Properties: {
    Period?: number;
    EvaluationPeriods?: number;
    MetricName: string;
    Namespace: string;
    Dimensions: { Name: string; Value: unknown }[];
    Threshold: number;
    ComparisonOperator: string;
    TreatMissingData: string;
    AlarmActions?: unknown[];
    OKActions?: unknown[];
  };
};

function alarmsOf(template: Template): Alarm[] {
  return Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Alarm[];
}

describe('alarms', () => {
  it('are not created by default: each would bill at rest', () => {
    const { template } = synth({});
    expect(alarmsOf(template)).toEqual([]);
    template.resourceCountIs('AWS::SNS::Topic', 0);
  });

  it('with floe:alarms=true watch the dead-letter queue and the errors and throttles of the function', () => {
    const { stack, template, nagErrors } = synth({ 'floe:alarms': 'true' });
    const ref = (c: { node: { defaultChild?: unknown } }): unknown => ({ Ref: stack.getLogicalId(c.node.defaultChild as never) });
    const fn = ref(stack.floe.apiFunction);
    const queueName = { 'Fn::GetAtt': [stack.getLogicalId(stack.floe.failedEvents.node.defaultChild as never), 'QueueName'] };
    const watched = alarmsOf(template).map((a) => [a.Properties.Namespace, a.Properties.MetricName, a.Properties.Dimensions]);
    expect(watched).toEqual(
      expect.arrayContaining([
        ['AWS/SQS', 'ApproximateNumberOfMessagesVisible', [{ Name: 'QueueName', Value: queueName }]],
        ['AWS/Lambda', 'Errors', [{ Name: 'FunctionName', Value: fn }]],
        ['AWS/Lambda', 'Throttles', [{ Name: 'FunctionName', Value: fn }]],
      ]),
    );
    expect(watched).toHaveLength(3);
    for (const a of alarmsOf(template)) {
      // One message, one error or one throttle is enough to fire; an idle cluster sends no data and is fine.
      expect(a.Properties).toMatchObject({
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
        Period: 300,
        EvaluationPeriods: 1,
      });
      expect(a.Properties.AlarmActions).toBeUndefined();
    }
    template.resourceCountIs('AWS::SNS::Topic', 0);
    expect(nagErrors).toEqual([]);
  });

  it('with floe:alarmEmail go to an SNS topic that mails the address, firing and clearing', () => {
    const { stack, template, nagErrors } = synth({ 'floe:alarms': 'true', 'floe:alarmEmail': 'ops@example.com' });
    const [topicId] = Object.keys(template.findResources('AWS::SNS::Topic'));
    expect(topicId).toBeDefined();
    template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com', TopicArn: { Ref: topicId } });
    const alarms = alarmsOf(template);
    expect(alarms).toHaveLength(3);
    for (const a of alarms) {
      expect(a.Properties.AlarmActions).toEqual([{ Ref: topicId }]);
      expect(a.Properties.OKActions).toEqual([{ Ref: topicId }]);
    }
    // The topic accepts only TLS publishers, and cdk-nag has nothing left unacknowledged.
    const policy = Object.values(template.findResources('AWS::SNS::TopicPolicy'))[0] as { Properties: { PolicyDocument: { Statement: Json[] } } };
    expect(policy.Properties.PolicyDocument.Statement).toEqual(
      expect.arrayContaining([expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]),
    );
    expect(nagErrors).toEqual([]);
    expect(Stack.of(stack.alarms!).stackName).toBe('Floe');
  });

  it('go to a topic of your own when FloeAlarms is given one', () => {
    const app = new App({
      outdir: mkdtempSync(join(tmpdir(), 'floe-cdk-alarms-')),
      builtinCloudFormationValidation: false,
      context: { 'aws:cdk:bundling-stacks': [] },
    });
    outdirs.push(app.outdir);
    const stack = new FloeStack(app, 'Own', { env: { account: '123456789012', region: 'us-east-1' } });
    const topic = new sns.Topic(stack, 'OpsTopic');
    new FloeAlarms(stack, 'MyAlarms', { cluster: stack.floe, topic });
    const template = Template.fromStack(stack);
    const topicRef = { Ref: stack.getLogicalId(topic.node.defaultChild as never) };
    const alarms = alarmsOf(template);
    expect(alarms).toHaveLength(3);
    for (const a of alarms) expect(a.Properties.AlarmActions).toEqual([topicRef]);
    template.resourceCountIs('AWS::SNS::Subscription', 0);
  });

  it('refuses an address without the flag, and a value that is not an address', () => {
    const from = (context: Record<string, string>) => () => stackPropsFromContext((key) => context[key]);
    expect(from({ 'floe:alarmEmail': 'ops@example.com' })).toThrow(ConfigurationError);
    expect(from({ 'floe:alarmEmail': 'ops@example.com' })).toThrow(/floe:alarmEmail needs floe:alarms=true/);
    expect(from({ 'floe:alarms': 'true', 'floe:alarmEmail': 'ops' })).toThrow(/must be an e-mail address, e\.g\. ops@example\.com, found 'ops'/);
    expect(from({ 'floe:alarms': 'yes' })).toThrow(/floe:alarms must be 'true' or 'false', found 'yes'/);
  });
});

describe('task tags in IAM', () => {
  it('let the roles that run tasks tag them only as RunTask creates them, in this cluster', () => {
    const { stack, template } = synth({});
    const policies = Object.values(template.findResources('AWS::IAM::Policy')) as {
      Properties: { Roles: { Ref: string }[]; PolicyDocument: { Statement: Json[] } };
    }[];
    const tagging = policies.flatMap((p) =>
      p.Properties.PolicyDocument.Statement.filter((st) => JSON.stringify(st['Action']).includes('ecs:TagResource')).map((st) => ({
        roles: p.Properties.Roles.map((r) => r.Ref),
        st,
      })),
    );
    const roleOf = (role: { node: { defaultChild?: unknown } }): string => stack.getLogicalId(role.node.defaultChild as never);
    // The Dispatcher starts JobManagers; a JobManager starts TaskExecutors; a TaskExecutor starts nothing.
    expect(tagging.flatMap((t) => t.roles).sort()).toEqual(
      [roleOf(stack.floe.apiFunction.role as never), roleOf(stack.floe.jobManagerTaskDefinition.taskRole as never)].sort(),
    );
    for (const { st } of tagging) {
      expect(st['Action']).toBe('ecs:TagResource');
      expect(st['Condition']).toEqual({ StringEquals: { 'ecs:CreateAction': 'RunTask' } });
      expect(JSON.stringify(st['Resource'])).toContain(`:task/",{"Ref":"${stack.getLogicalId(stack.floe.cluster.node.defaultChild as never)}"},"/*"`);
    }
  });
});

describe('job metrics in the template', () => {
  it("route the JobManagers' job-ended events on the cluster's bus to the function that writes them", () => {
    const { stack, template } = synth({});
    const bus = stack.getLogicalId(stack.floe.eventBus.node.defaultChild as never);
    const fn = stack.getLogicalId(stack.floe.apiFunction.node.defaultChild as never);
    const rules = Object.values(template.findResources('AWS::Events::Rule')) as {
      Properties: {
        EventBusName?: unknown;
        EventPattern?: { source?: string[]; 'detail-type'?: string[] };
        Targets: { Arn: unknown; DeadLetterConfig?: unknown }[];
      };
    }[];
    const jobEnded = rules.filter((r) => r.Properties.EventPattern?.['detail-type']?.includes(JOB_ENDED_EVENT.detailType));
    expect(jobEnded).toHaveLength(1);
    expect(jobEnded[0]!.Properties.EventBusName).toEqual({ Ref: bus });
    expect(jobEnded[0]!.Properties.EventPattern).toEqual({ source: [JOB_ENDED_EVENT.source], 'detail-type': [JOB_ENDED_EVENT.detailType] });
    expect(jobEnded[0]!.Properties.Targets.map((t) => t.Arn)).toEqual([{ 'Fn::GetAtt': [fn, 'Arn'] }]);
    // An event the function cannot handle is kept in the dead-letter queue (the alarm watches it).
    expect(jobEnded[0]!.Properties.Targets[0]!.DeadLetterConfig).toEqual({
      Arn: { 'Fn::GetAtt': [stack.getLogicalId(stack.floe.failedEvents.node.defaultChild as never), 'Arn'] },
    });
  });
});

describe('large results in IAM', () => {
  it("let the Dispatcher function's role GetObject the result objects it presigns links to", () => {
    const { stack, template } = synth({});
    const role = stack.getLogicalId(stack.floe.apiFunction.role!.node.defaultChild as never);
    const bucket = stack.getLogicalId(stack.floe.bucket.node.defaultChild as never);
    const policies = Object.values(template.findResources('AWS::IAM::Policy')) as {
      Properties: { Roles: { Ref: string }[]; PolicyDocument: { Statement: Json[] } };
    }[];
    const gets = policies
      .filter((p) => p.Properties.Roles.some((r) => r.Ref === role))
      .flatMap((p) => p.Properties.PolicyDocument.Statement)
      .filter((st) => st['Effect'] === 'Allow' && [st['Action']].flat().includes('s3:GetObject'))
      .flatMap((st) => [st['Resource']].flat());
    // Each resource as a pattern over keys of the bucket: the result key must match one.
    const patterns = gets
      .map((r) => JSON.stringify(r))
      .filter((r) => r.includes(`"Fn::GetAtt":["${bucket}","Arn"]`))
      .map((r) => (JSON.parse(r) as { 'Fn::Join': [string, unknown[]] })['Fn::Join'][1].at(-1) as string)
      .map(
        (tail) =>
          new RegExp(
            '^' +
              tail
                .replace(/^\//, '')
                .split('*')
                .map((x) => x.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
                .join('.*') +
              '$',
          ),
      );
    expect(
      patterns.some((re) => re.test('floe/jobs/0123abcd/result.json')),
      String(patterns),
    ).toBe(true);
  });
});
