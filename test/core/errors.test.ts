import { describe, expect, it } from 'vitest';
import { ERROR_CODES, FencingTokenError, FloeError, NotFoundError, fromErrorInfo, isErrorCode, toErrorInfo } from '../../runtime/core/errors.js';

describe('error codes', () => {
  it('gives every FloeError the HTTP status registered with its code', () => {
    for (const [code, status] of Object.entries(ERROR_CODES)) {
      if (!isErrorCode(code)) throw new Error(`${code} is not registered`);
      expect(new FloeError(code, 'x').httpStatus, code).toBe(status);
    }
    expect(new NotFoundError('gone').httpStatus).toBe(404);
    expect(new FencingTokenError('JobMaster', 2, 1).httpStatus).toBe(409);
  });

  it('answers the same status for a code raised ad hoc as for its class', () => {
    expect(new FloeError('INVALID_REQUEST', 'bad').httpStatus).toBe(400);
    expect(new FloeError('NOT_FOUND', 'gone').httpStatus).toBe(404);
  });

  it('rebuilds the class of a registered code from the wire, and keeps an unregistered code with status 500', () => {
    const fencing = fromErrorInfo(toErrorInfo(new FencingTokenError('JobMaster', 3, 2)));
    expect(fencing).toBeInstanceOf(FencingTokenError);
    expect(fencing.httpStatus).toBe(409);
    const unknown = fromErrorInfo({ code: 'FROM_A_NEWER_PEER', message: 'something new', retryable: true });
    expect(unknown).toBeInstanceOf(FloeError);
    expect(unknown.code).toBe('FROM_A_NEWER_PEER');
    expect(unknown.retryable).toBe(true);
    expect(unknown.httpStatus).toBe(500);
  });
});
