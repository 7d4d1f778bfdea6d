// The CDK app: `cd cdk && npx cdk deploy` (or `npm run deploy`). Options come as context (-c key=value):
//   floe:stackName      stack name (default Floe)
//   floe:removalPolicy  'retain' (default) keeps the bucket, tables, secret and logs on `cdk destroy`; 'destroy' deletes them
//   floe:config         JSON object of Floe config options, e.g. '{"taskmanager.numberOfTaskSlots":4}'
//   floe:cpuArchitecture 'arm64' (default, Graviton) or 'x86_64': the tasks' CPU and the image's platform
//   floe:spot           'true' (default) runs TaskExecutors on Fargate Spot with on-demand fallback; 'false' on demand only
import { App, RemovalPolicy } from 'aws-cdk-lib';
import { CpuArchitecture } from 'aws-cdk-lib/aws-ecs';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { FloeStack } from '../lib/floe-stack.js';

const app = new App();

function contextString(key: string): string | undefined {
  const v: unknown = app.node.tryGetContext(key);
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}

function removalPolicy(): RemovalPolicy {
  const raw = contextString('floe:removalPolicy') ?? 'retain';
  if (raw === 'retain') return RemovalPolicy.RETAIN;
  if (raw === 'destroy') return RemovalPolicy.DESTROY;
  throw new ConfigurationError(`context floe:removalPolicy must be 'retain' or 'destroy', found '${raw}'`);
}

function cpuArchitecture(): CpuArchitecture {
  const raw = contextString('floe:cpuArchitecture') ?? 'arm64';
  if (raw === 'arm64') return CpuArchitecture.ARM64;
  if (raw === 'x86_64') return CpuArchitecture.X86_64;
  throw new ConfigurationError(`context floe:cpuArchitecture must be 'arm64' or 'x86_64', found '${raw}'`);
}

function spot(): boolean {
  const raw = contextString('floe:spot') ?? 'true';
  if (raw === 'true' || raw === 'false') return raw === 'true';
  throw new ConfigurationError(`context floe:spot must be 'true' or 'false', found '${raw}'`);
}

function config(): Record<string, string | number> {
  const raw = contextString('floe:config');
  if (raw === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw new ConfigurationError(`context floe:config must be a JSON object of config options, found '${raw}' (${(e as Error).message})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigurationError(`context floe:config must be a JSON object of config options, found '${raw}'`);
  }
  return parsed as Record<string, string | number>;
}

const account = process.env['CDK_DEFAULT_ACCOUNT'];
const region = process.env['CDK_DEFAULT_REGION'];
new FloeStack(app, contextString('floe:stackName') ?? 'Floe', {
  // Bound to the CLI's account and region when it knows them; environment-agnostic otherwise.
  ...(account !== undefined && region !== undefined ? { env: { account, region } } : {}),
  cluster: { removalPolicy: removalPolicy(), config: config(), cpuArchitecture: cpuArchitecture(), taskExecutorSpot: spot() },
});
