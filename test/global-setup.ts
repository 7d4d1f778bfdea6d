// Before the suite: builds dist/ once (process-level tests start the built entry points), and starts one
// DynamoDB Local that every test file shares, each with tables of its own (test/aws/emulators.ts): a JVM
// per file cost ~2 s of CPU each, 50-odd times a run. Stopped when the suite ends.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { SHARED_DYNAMODB_ENV, startSharedDynamoDbLocal } from './aws/emulators.js';

export default async function setup(): Promise<() => Promise<void>> {
  execFileSync(process.execPath, [fileURLToPath(new URL('../runtime/build.mjs', import.meta.url))], { stdio: 'inherit' });
  // An outside endpoint (FLOE_TEST_AWS_ENDPOINT) serves DynamoDB itself; so does one named already.
  if (process.env['FLOE_TEST_AWS_ENDPOINT'] || process.env[SHARED_DYNAMODB_ENV]) return async () => undefined;
  const dynamo = await startSharedDynamoDbLocal();
  // The test files' processes start after this and inherit it.
  process.env[SHARED_DYNAMODB_ENV] = dynamo.endpoint;
  return async () => {
    delete process.env[SHARED_DYNAMODB_ENV];
    await dynamo.stop();
  };
}
