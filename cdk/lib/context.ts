// The CDK app's options, from context (`cdk deploy -c key=value`), checked: a value that is not one of
// the allowed ones fails the synth naming the key.
//   floe:stackName              stack name (default Floe)
//   floe:removalPolicy          'retain' (default) keeps the bucket, tables, secret and logs on `cdk destroy`; 'destroy' deletes them
//   floe:config                 JSON object of Floe config options, e.g. '{"taskmanager.numberOfTaskSlots":4}'
//   floe:cpuArchitecture        'arm64' (default, Graviton) or 'x86_64': the tasks' CPU and the image's platform
//   floe:spot                   'true' (default) runs TaskExecutors on Fargate Spot with on-demand fallback; 'false' on demand only
//   floe:jobManagerCpu, floe:jobManagerMemoryMiB, floe:taskExecutorCpu, floe:taskExecutorMemoryMiB
//                               task sizes (CPU units, 1024 = 1 vCPU; MiB), a valid Fargate pair
//   floe:vpcId, floe:subnetIds  an existing VPC (looked up at synth) and, optionally, comma-separated subnet ids
//   floe:image                  an image URI to run instead of building cdk/Dockerfile; a private ECR one gets pull permission
//   floe:apiReservedConcurrency reserved concurrency of the Dispatcher function (default none: needs an account limit of 100 + it)
//   floe:logRetentionDays       days the logs are kept (one of CloudWatch's values; default 30)
//   floe:jobRetentionDays, floe:libraryRetentionDays, floe:stagingRetentionDays
//   floe:warmPoolJobManagers, floe:warmPoolTaskManagers, floe:warmPoolIdleSeconds
//                               the warm pool (ready JobManager and TaskExecutor tasks after a job); 0 JobManagers turns it off
//   floe:alarms                 'true' adds CloudWatch alarms (dead-letter queue, each function's errors and throttles); 'false' (default)
//   floe:alarmEmail             an address the alarms are mailed to through a new SNS topic (needs floe:alarms=true)
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { CpuArchitecture } from 'aws-cdk-lib/aws-ecs';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import { ConfigurationError } from '../../runtime/core/errors.js';
import type { FloeClusterProps } from './floe-cluster.js';
import { containerImageFromUri } from './image.js';
import type { FloeStackProps } from './floe-stack.js';

export function stackPropsFromContext(get: (key: string) => unknown): FloeStackProps & { stackName: string } {
  const text = (key: string): string | undefined => {
    const v = get(key);
    if (v === undefined || v === null || v === '') return undefined;
    return typeof v === 'string' ? v : JSON.stringify(v);
  };
  const oneOf = <T>(key: string, fallback: string, values: Record<string, T>): T => {
    const raw = text(key) ?? fallback;
    if (!Object.hasOwn(values, raw))
      throw new ConfigurationError(
        `context ${key} must be ${Object.keys(values)
          .map((v) => `'${v}'`)
          .join(' or ')}, found '${raw}'`,
      );
    return values[raw]!;
  };
  const positive = (key: string): number | undefined => {
    const raw = text(key);
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n <= 0) throw new ConfigurationError(`context ${key} must be a whole number above 0, found '${raw}'`);
    return n;
  };
  const days = (key: string): Duration | undefined => {
    const n = positive(key);
    return n === undefined ? undefined : Duration.days(n);
  };
  const config = (): Record<string, string | number> | undefined => {
    const raw = text('floe:config');
    if (raw === undefined) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch (e) {
      throw new ConfigurationError(`context floe:config must be a JSON object of config options, found '${raw}' (${(e as Error).message})`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw new ConfigurationError(`context floe:config must be a JSON object of config options, found '${raw}'`);
    return parsed as Record<string, string | number>;
  };
  const count = (key: string): number | undefined => {
    const raw = text(key);
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < 0) throw new ConfigurationError(`context ${key} must be a whole number, 0 or more, found '${raw}'`);
    return n;
  };
  const warmPool = (): FloeClusterProps['warmPool'] => {
    const jobManagers = count('floe:warmPoolJobManagers');
    const taskManagers = count('floe:warmPoolTaskManagers');
    const idleSeconds = count('floe:warmPoolIdleSeconds');
    if (jobManagers === undefined && taskManagers === undefined && idleSeconds === undefined) return undefined;
    return {
      ...(jobManagers !== undefined ? { jobManagers } : {}),
      ...(taskManagers !== undefined ? { taskManagers } : {}),
      ...(idleSeconds !== undefined ? { idleTimeout: Duration.seconds(idleSeconds) } : {}),
    };
  };
  const logRetention = (): RetentionDays | undefined => {
    const n = positive('floe:logRetentionDays');
    if (n === undefined) return undefined;
    const allowed = Object.values(RetentionDays).filter((v): v is number => typeof v === 'number');
    if (!allowed.includes(n))
      throw new ConfigurationError(
        `context floe:logRetentionDays must be one of CloudWatch's retention periods (${allowed.sort((a, b) => a - b).join(', ')}), found ${n}`,
      );
    return n as RetentionDays;
  };

  const cluster: FloeClusterProps = {
    removalPolicy: oneOf('floe:removalPolicy', 'retain', { retain: RemovalPolicy.RETAIN, destroy: RemovalPolicy.DESTROY }),
    cpuArchitecture: oneOf('floe:cpuArchitecture', 'arm64', { arm64: CpuArchitecture.ARM64, x86_64: CpuArchitecture.X86_64 }),
    taskExecutorSpot: oneOf('floe:spot', 'true', { true: true, false: false }),
  };
  const optional: Partial<Record<keyof FloeClusterProps, unknown>> = {
    config: config(),
    jobManagerCpu: positive('floe:jobManagerCpu'),
    jobManagerMemoryLimitMiB: positive('floe:jobManagerMemoryMiB'),
    taskExecutorCpu: positive('floe:taskExecutorCpu'),
    taskExecutorMemoryLimitMiB: positive('floe:taskExecutorMemoryMiB'),
    image: text('floe:image') === undefined ? undefined : containerImageFromUri(text('floe:image')!),
    apiReservedConcurrency: positive('floe:apiReservedConcurrency'),
    logRetention: logRetention(),
    jobRetention: days('floe:jobRetentionDays'),
    libraryRetention: days('floe:libraryRetentionDays'),
    stagingRetention: days('floe:stagingRetentionDays'),
    warmPool: warmPool(),
  };
  const alarms = oneOf('floe:alarms', 'false', { true: true, false: false });
  const alarmEmail = text('floe:alarmEmail');
  if (alarmEmail !== undefined && !alarms)
    throw new ConfigurationError(
      `context floe:alarmEmail needs floe:alarms=true (the alarms it would receive), found floe:alarms '${text('floe:alarms') ?? 'false'}'`,
    );
  if (alarmEmail !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(alarmEmail))
    throw new ConfigurationError(`context floe:alarmEmail must be an e-mail address, e.g. ops@example.com, found '${alarmEmail}'`);
  const subnetIds = text('floe:subnetIds')
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const vpcId = text('floe:vpcId');
  if (subnetIds !== undefined && vpcId === undefined) throw new ConfigurationError('context floe:subnetIds needs floe:vpcId, the VPC they belong to');
  return {
    stackName: text('floe:stackName') ?? 'Floe',
    cluster: { ...cluster, ...(Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)) as FloeClusterProps) },
    ...(vpcId !== undefined ? { vpcId } : {}),
    ...(subnetIds !== undefined ? { subnetIds } : {}),
    ...(alarms ? { alarms: alarmEmail !== undefined ? { email: alarmEmail } : {} } : {}),
  };
}
