// The bodies of POST /jobs/:id/savepoints and /jobs/:id/stop in Flink's field names: what each asks of the
// JobMaster, and a 400 naming the field at fault.
import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../runtime/core/errors.js';
import { parseSavepointBody, parseStopBody } from '../../runtime/dispatcher/savepoint-requests.js';

describe('savepoint request bodies', () => {
  it("POST /savepoints: 'target-directory' and 'cancel-job'", () => {
    expect(parseSavepointBody({})).toEqual({});
    expect(parseSavepointBody(undefined)).toEqual({});
    expect(parseSavepointBody({ 'target-directory': '/sp', 'cancel-job': false })).toEqual({ targetDirectory: '/sp' });
    expect(parseSavepointBody({ 'target-directory': 's3://b/sp', 'cancel-job': true })).toEqual({ targetDirectory: 's3://b/sp', then: 'cancel' });
  });

  it("POST /stop: 'targetDirectory' and 'drain'", () => {
    expect(parseStopBody({})).toEqual({ then: 'suspend' });
    expect(parseStopBody({ targetDirectory: 'file:///sp', drain: true })).toEqual({ targetDirectory: 'file:///sp', then: 'drain' });
  });

  it('refuses a field of the wrong kind, naming it', () => {
    const refused = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidRequestError);
        return (e as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refused(() => parseSavepointBody({ 'target-directory': 'relative/dir' }))).toBe(
      `field 'target-directory' must be an absolute path or a URI (file://…, s3://…), found "relative/dir"`,
    );
    expect(refused(() => parseSavepointBody({ 'cancel-job': 'yes' }))).toBe(`field 'cancel-job' must be true or false, found "yes"`);
    expect(refused(() => parseStopBody({ drain: 1 }))).toBe(`field 'drain' must be true or false, found 1`);
    expect(refused(() => parseStopBody([]))).toBe('the request body must be a JSON object, found an array');
  });
});
