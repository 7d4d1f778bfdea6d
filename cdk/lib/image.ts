// A prebuilt image named by its URI (`-c floe:image=…`): one in a private ECR repository gets the pull
// permission on that repository for the execution role of each task definition that runs it; any other
// registry is pulled as it is (a public one needs no permission).
import { Stack } from 'aws-cdk-lib';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import type { Construct } from 'constructs';
import { ConfigurationError } from '../../runtime/core/errors.js';

/** Where a private ECR image lives, read from its URI. */
export interface EcrImageLocation {
  readonly account: string;
  readonly region: string;
  readonly repositoryName: string;
}

// <account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]/<repository>[:<tag>|@<digest>]
const ECR_URI = /^(\d{12})\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?\/([^:@]+)(?::[^:@/]+|@sha256:[0-9a-f]{64})?$/;

/** The repository of a private ECR image URI; undefined for an image of any other registry. */
export function ecrImageLocation(uri: string): EcrImageLocation | undefined {
  if (!/^\d{12}\.dkr\.ecr/.test(uri)) return undefined;
  const m = ECR_URI.exec(uri);
  if (m === null) {
    throw new ConfigurationError(
      `context floe:image looks like a private ECR image but is not one: expected <account>.dkr.ecr.<region>.amazonaws.com/<repository>[:<tag>|@sha256:<digest>], found '${uri}'`,
    );
  }
  return { account: m[1]!, region: m[2]!, repositoryName: m[3]! };
}

/** The image at `uri`, with the pull permission it needs. */
export function containerImageFromUri(uri: string): ecs.ContainerImage {
  const location = ecrImageLocation(uri);
  return location === undefined ? ecs.ContainerImage.fromRegistry(uri) : new PrivateEcrImage(uri, location);
}

/** The image exactly as named, pulled by an execution role allowed to read its repository and nothing more. */
class PrivateEcrImage extends ecs.ContainerImage {
  constructor(
    private readonly uri: string,
    private readonly location: EcrImageLocation,
  ) {
    super();
  }

  override bind(scope: Construct, containerDefinition: ecs.ContainerDefinition): ecs.ContainerImageConfig {
    const repositoryArn = Stack.of(scope).formatArn({
      service: 'ecr',
      account: this.location.account,
      region: this.location.region,
      resource: 'repository',
      resourceName: this.location.repositoryName,
    });
    // Layer and image reads on this repository, and ecr:GetAuthorizationToken, which names no resource.
    const repository = ecr.Repository.fromRepositoryAttributes(scope, 'ImageRepository', { repositoryArn, repositoryName: this.location.repositoryName });
    repository.grantPull(containerDefinition.taskDefinition.obtainExecutionRole());
    return { imageName: this.uri };
  }
}
