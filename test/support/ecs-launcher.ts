// An EcsWorkerLauncher against the ECS emulator, as the launcher tests build it: cluster 'test', one
// subnet and security group, a generous rate limit and a fast status poll; each test names its task
// definitions and retry policy.
import { systemClock } from '../../runtime/core/clock.js';
import { silentLogger } from '../../runtime/core/logger.js';
import { createEcsClient, EcsWorkerLauncher, type EcsWorkerLauncherOptions } from '../../runtime/aws/ecs-worker-launcher.js';
import type { EcsEmulator } from '../aws/ecs-emulator.js';

const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };

export function emulatedEcsLauncher(
  emulator: EcsEmulator,
  defaults: Pick<EcsWorkerLauncherOptions, 'taskDefinitions' | 'retry'>,
  overrides: Partial<EcsWorkerLauncherOptions> = {},
): EcsWorkerLauncher {
  return new EcsWorkerLauncher({
    ecs: createEcsClient({ region: emulator.region, endpoint: emulator.endpoint, credentials: CREDENTIALS }),
    cluster: 'test',
    taskDefinitions: defaults.taskDefinitions,
    network: { subnets: ['subnet-1'], securityGroups: ['sg-1'] },
    clock: systemClock,
    retry: defaults.retry,
    rateLimit: { capacity: 20, refillPerSecond: 100 },
    pollIntervalMs: 50,
    logger: silentLogger,
    ...overrides,
  });
}
