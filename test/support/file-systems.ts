// Each test file's process registers the file systems its in-process clusters, JobMasters and tasks reach,
// as the entry points do: local paths, and S3 (loaded on the first s3:// path), with the job-data
// credentials of the AWS backend. A vitest setup file: it runs before each test file.
import { s3FileSystem, stsJobDataCredentials } from '../../runtime/aws/s3-file-system.js';
import { registerKinesisTaskConnector } from '../../runtime/aws/kinesis-connector.js';
import { registerKinesisJobMasterConnector } from '../../runtime/aws/kinesis-source-enumerator.js';
import { registerJobDataCredentialsProvider } from '../../runtime/blob/data-credentials.js';
import { registerFileSystem } from '../../runtime/blob/file-systems.js';
import { localFileSystem } from '../../runtime/local/fs-file-system.js';

registerFileSystem(localFileSystem);
registerFileSystem(s3FileSystem);
registerJobDataCredentialsProvider(stsJobDataCredentials);
registerKinesisTaskConnector();
registerKinesisJobMasterConnector();
