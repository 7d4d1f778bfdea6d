// The CDK app: `cd cdk && npx cdk deploy` (or `npm run deploy`). Options come as context (-c key=value);
// cdk/lib/context.ts lists and checks them.
import { App, Aspects } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { stackPropsFromContext } from '../lib/context.js';
import { FloeStack } from '../lib/floe-stack.js';

const app = new App();
const { stackName, ...props } = stackPropsFromContext((key) => app.node.tryGetContext(key));
const account = process.env['CDK_DEFAULT_ACCOUNT'];
const region = process.env['CDK_DEFAULT_REGION'];
new FloeStack(app, stackName, {
  // Bound to the CLI's account and region when it knows them; environment-agnostic otherwise.
  ...(account !== undefined && region !== undefined ? { env: { account, region } } : {}),
  ...props,
});
Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
