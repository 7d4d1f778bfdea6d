import { describe, expect, it } from 'vitest';
import {
  attemptStagingLocationFor,
  fileSystemFor,
  inputStoreFor,
  outputStoreFor,
  registerFileSystem,
  registeredSchemes,
  schemeOf,
  type FileSystemFactory,
} from '../../runtime/blob/file-systems.js';
import type { InputStore } from '../../runtime/blob/input-store.js';
import { ConfigurationError } from '../../runtime/core/errors.js';
import { FsInputStore } from '../../runtime/local/fs-input-store.js';
import { FsOutputStore } from '../../runtime/local/fs-output-store.js';

describe('file systems by scheme', () => {
  it('names a path without scheme:// a local one, and takes the scheme of a URI otherwise', () => {
    expect(schemeOf('/tmp/in.txt')).toBe('file');
    expect(schemeOf('C:\\data\\in.txt')).toBe('file');
    expect(schemeOf('s3://bucket/key')).toBe('s3');
    expect(schemeOf('HDFS://nn/x')).toBe('hdfs');
  });

  it('serves each path from the file system registered for its scheme (the set-up registers file and s3)', async () => {
    expect(registeredSchemes()).toEqual(expect.arrayContaining(['file', 's3']));
    expect(await inputStoreFor('/tmp/in.txt')).toBeInstanceOf(FsInputStore);
    expect(await outputStoreFor('/tmp/out')).toBeInstanceOf(FsOutputStore);
    expect(attemptStagingLocationFor('/tmp/out', 'job1', 'att-1')).toBe('/tmp/.out.staging-job1/att-1');
    expect(attemptStagingLocationFor('s3://b-1/out/', 'job1', 'att-1')).toBe('s3://b-1/out/.floe-staging-job1/att-1');
  });

  it('refuses a path whose scheme no one registered, naming the scheme, the registered ones and what to do', async () => {
    const refusal = await inputStoreFor('mem1://x/y').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refusal).toBeInstanceOf(ConfigurationError);
    expect((refusal as Error).message).toBe(
      "no file system serves 'mem1' paths such as 'mem1://x/y': this process registered 'file', 's3'; " +
        "name a path of a registered scheme, or register a FileSystemFactory for 'mem1' (registerFileSystem) at the process's entry point",
    );
    await expect(outputStoreFor('mem1://x/y')).rejects.toBeInstanceOf(ConfigurationError);
    expect(() => attemptStagingLocationFor('mem1://x/y', 'job1', 'att-1')).toThrow(ConfigurationError);
  });

  it('takes a registered factory for its scheme, the latest registration winning', async () => {
    const store: InputStore = {
      listFiles: async () => [],
      read: () => {
        throw new Error('not read here');
      },
    };
    const factory = (tag: string): FileSystemFactory => ({
      scheme: 'mem2',
      inputStore: async () => store,
      outputStore: () => Promise.reject(new Error('no sinks')),
      attemptStagingLocation: (target, jobId, attemptId) => `${target}/${tag}/${jobId}/${attemptId}`,
    });
    registerFileSystem(factory('a'));
    registerFileSystem(factory('b'));
    expect(fileSystemFor('mem2://x').scheme).toBe('mem2');
    expect(await inputStoreFor('mem2://x')).toBe(store);
    expect(attemptStagingLocationFor('mem2://x', 'j', 'a1')).toBe('mem2://x/b/j/a1');
  });
});
