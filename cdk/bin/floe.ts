// The CDK app: `cd cdk && npx cdk deploy` (or `npm run deploy`). Options come as context (-c key=value):
//   floe:stackName      stack name (default Floe)
//   floe:removalPolicy  'retain' (default) keeps the bucket, tables, secret and logs on `cdk destroy`; 'destroy' deletes them
//   floe:config         JSON object of Floe config options, e.g. '{"taskmanager.numberOfTaskSlots":4}'
import { App, RemovalPolicy } from 'aws-cdk-lib';
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
  cluster: { removalPolicy: removalPolicy(), config: config() },
});
