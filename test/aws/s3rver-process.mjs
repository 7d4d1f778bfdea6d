// s3rver in a process of its own, for the emulator harness (test/aws/emulators.ts). Run with
// --openssl-legacy-provider: s3rver ciphers its list continuation tokens with DES, which Node 17+ only
// has through the legacy provider. Prints {"port":N} once listening; exits when its stdin closes (the
// harness stopped it or died) or on SIGTERM, removing its folder.
// Usage: node --openssl-legacy-provider s3rver-process.mjs <directory> <bucket>
import { rmSync } from 'node:fs';
import { Readable } from 'node:stream';
import S3rver from 's3rver';
import AWSAccount from 's3rver/lib/models/account.js';

const [directory, bucket] = process.argv.slice(2);
if (directory === undefined || bucket === undefined) {
  process.stderr.write('usage: s3rver-process.mjs <directory> <bucket>\n');
  process.exit(2);
}

// The keys the STS emulator hands out (test/aws/sts-emulator.ts, stsSessionKey): session credentials S3
// takes, each distinct, so a call can be told apart by the session whose key signed it.
for (let i = 0; i < 100; i++)
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(`ASIAFLOETESTSESS${String(i).padStart(4, '0')}`, `floe-test-session-secret-${String(i).padStart(4, '0')}`);

const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
makeObjectWritesAtomic(server.store);
const { port } = await server.run();
process.stdout.write(`${JSON.stringify({ port })}\n`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  server
    .close()
    .catch(() => undefined)
    .finally(() => {
      // The harness removes the folder too, but cannot when it died first.
      rmSync(directory, { recursive: true, force: true });
      process.exit(0);
    });
};
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

/**
 * S3 replaces an object atomically: a reader sees the old object or the new one, whole. s3rver writes
 * the object file in place, so a concurrent reader could see a torn mix. Serializing the writes, reads
 * and deletes of each key (reads buffered whole under the lock) gives this emulator S3's guarantee.
 */
function makeObjectWritesAtomic(store) {
  const tails = new Map();
  const locked = (bucketName, key, fn) => {
    const id = `${bucketName}/${key}`;
    const run = (tails.get(id) ?? Promise.resolve()).then(fn, fn);
    const settled = run.catch(() => undefined);
    tails.set(id, settled);
    void settled.then(() => {
      if (tails.get(id) === settled) tails.delete(id);
    });
    return run;
  };
  const putObject = store.putObject.bind(store);
  const getObject = store.getObject.bind(store);
  const deleteObject = store.deleteObject.bind(store);
  store.putObject = (object) => locked(object.bucket, object.key, () => putObject(object));
  store.deleteObject = (bucketName, key) => locked(bucketName, key, () => deleteObject(bucketName, key));
  store.getObject = (bucketName, key, options) =>
    locked(bucketName, key, async () => {
      const object = await getObject(bucketName, key, options);
      if (object === null || !(object.content instanceof Readable)) return object;
      const chunks = [];
      for await (const chunk of object.content) chunks.push(chunk);
      object.content = Readable.from([Buffer.concat(chunks)]);
      return object;
    });
}
