import { describe, expect, it } from 'vitest';
import { FencingTokenError, FloeError, InvalidRequestError, NotFoundError, StaleWriterError } from '../../runtime/core/errors.js';
import { FencingToken } from '../../runtime/core/ids.js';
import { RpcDispatcher, encodeArgs } from '../../runtime/rpc/rpc-dispatcher.js';

const impl = {
  when: async () => ({ at: new Date(0), skipped: undefined, list: [undefined] }),
  big: async () => 10n,
  stale: async () => {
    throw new StaleWriterError('job j1 was written by epoch 5; this writer holds epoch 4');
  },
  sum: async (...xs: number[]) => xs.reduce((a, b) => a + b, 0),
};
const methods = ['when', 'big', 'stale', 'sum'] as const;

describe('RpcDispatcher', () => {
  it('normalises results through JSON, as a remote caller would see them', async () => {
    const d = new RpcDispatcher('local://x');
    d.register('e', impl, { methods });
    await expect(d.dispatch('e', 'when', [], undefined)).resolves.toEqual({ at: '1970-01-01T00:00:00.000Z', list: [null] });
    await expect(d.dispatch('e', 'sum', [1, 2, 3], undefined)).resolves.toBe(6);
  });

  it('turns a result JSON cannot carry into a clear error', async () => {
    const d = new RpcDispatcher('local://x');
    d.register('e', impl, { methods });
    const error = await d.dispatch('e', 'big', [], undefined).catch((e: unknown) => e);
    expect((error as FloeError).code).toBe('RPC_BAD_RESULT');
    expect((error as Error).message).toContain('e.big returned a value that is not JSON');
  });

  it('rebuilds the thrown error class and maps it to its HTTP status', async () => {
    const d = new RpcDispatcher('local://x');
    d.register('e', impl, { methods });
    await expect(d.dispatch('e', 'stale', [], undefined)).rejects.toBeInstanceOf(StaleWriterError);
    const reply = await d.handle('e', 'stale', [], undefined);
    expect(reply.status).toBe(409);
    expect(JSON.parse(reply.body)).toMatchObject({ ok: false, error: { code: 'STALE_WRITER' } });
  });

  it('checks endpoint, method, arguments and fencing token before running anything', async () => {
    const d = new RpcDispatcher('http://127.0.0.1:1');
    let ran = 0;
    d.register('rm', { go: async () => ++ran }, { methods: ['go'], fencingToken: FencingToken.of(9) });
    await expect(d.dispatch('nope', 'go', [], 9)).rejects.toBeInstanceOf(NotFoundError);
    await expect(d.dispatch('rm', 'stop', [], 9)).rejects.toBeInstanceOf(InvalidRequestError);
    expect((await d.handle('rm', 'go', { not: 'an array' }, 9)).status).toBe(400);
    await expect(d.dispatch('rm', 'go', [], 8)).rejects.toBeInstanceOf(FencingTokenError);
    await expect(d.dispatch('rm', 'go', [], undefined)).rejects.toBeInstanceOf(FencingTokenError);
    expect(ran).toBe(0);
    await expect(d.dispatch('rm', 'go', [], 9)).resolves.toBe(1);
  });

  it('refuses to serve two endpoints under one name', () => {
    const d = new RpcDispatcher('local://x');
    d.register('e', impl, { methods });
    expect(() => d.register('e', impl, { methods })).toThrow(/already served/);
  });

  it('encodes arguments without trailing undefineds', () => {
    expect(encodeArgs([1, undefined, 2, undefined, undefined])).toBe('[1,null,2]');
    expect(encodeArgs([undefined])).toBe('[]');
  });
});
