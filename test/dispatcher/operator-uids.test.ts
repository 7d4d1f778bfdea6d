// A checkpointing job whose stateful operators lack uid(…) is accepted with a warning in the job's log (the
// Dispatcher's line carries the job id, so `floe logs <job>` shows it), naming each such operator.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../runtime/core/logger.js';
import type { JobGraph } from '../../runtime/jobgraph/jobgraph.js';
import { statefulOperatorsWithoutUid } from '../../runtime/jobgraph/operator-uids.js';
import { directFront, fixtureLibrary, graphFor, prepareFixtureLibrary, setupDispatcher } from './rest-contract.js';

describe('stateful operators without uid at submission', () => {
  beforeAll(prepareFixtureLibrary);
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  const submit = async (graph: JobGraph) => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger({}, (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    const env = await setupDispatcher(directFront, cleanups, { logger });
    const res = await env.call('POST', '/jobs', { jobGraph: graph, library: Buffer.from(fixtureLibrary().library).toString('base64') });
    return { res, warnings: lines.filter((l) => l['level'] === 'warn') };
  };

  it("warns in the job's log, naming the source and sink without uid, when the job checkpoints; the job is accepted", async () => {
    const plain = await graphFor('uids-1');
    // The user gave the sink a uid: only the source is named.
    const graph: JobGraph = {
      ...plain,
      checkpointing: { intervalMs: 1_000 },
      vertices: plain.vertices.map((v) => ({ ...v, operators: v.operators.map((op) => (op.kind.startsWith('sink.') ? { ...op, uid: 'out' } : op)) })),
    };
    const missing = statefulOperatorsWithoutUid(graph);
    expect(missing.map((m) => m.kind)).toEqual(['source.textFile']);
    const { res, warnings } = await submit(graph);
    expect(res.status).toBe(202);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      jobId: 'uids-1',
      msg: expect.stringMatching(/1 stateful operator\(s\) of a checkpointing job have no uid/),
      operators: [`'${missing[0]!.name}' (source.textFile, stored as ${missing[0]!.stateId})`],
    });
  });

  it('says nothing for a job that does not checkpoint', async () => {
    const { res, warnings } = await submit(await graphFor('uids-2'));
    expect(res.status).toBe(202);
    expect(warnings).toEqual([]);
  });
});
