// Submission refuses a text sink target that would destroy or mix with what is there: a folder holding
// the user's files, a regular file, a path that climbs out with '..'. Nothing is stored, recorded or
// started for a refused job, and the files stay as they were.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FsOutputStore } from '../../runtime/local/fs-output-store.js';
import { directFront, fixtureLibrary, graphFor, prepareFixtureLibrary, setupDispatcher } from './rest-contract.js';

const home = mkdtempSync(join(tmpdir(), 'floe-sink-targets-'));
// The input the jobs name: a local source must exist when the job is submitted.
writeFileSync(join(home, 'in.txt'), '');
afterAll(() => rmSync(home, { recursive: true, force: true }));

/** A user's project folder: the job file, its input and notes. */
function projectFolder(name: string): { dir: string; files: Record<string, string> } {
  const dir = join(home, name);
  mkdirSync(dir);
  const files = {
    'job.ts': "import { defineJob } from 'floe';\n// the user's job\n",
    'input.txt': 'alpha beta gamma delta\nepsilon zeta\n',
    'notes.md': '# notes\nthings I must not lose\n',
  };
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  return { dir, files };
}

function expectIntact(dir: string, files: Record<string, string>): void {
  expect(readdirSync(dir).sort()).toEqual(Object.keys(files).sort());
  for (const [f, text] of Object.entries(files)) expect(readFileSync(join(dir, f), 'utf8')).toBe(text);
}

describe('text sink targets at submission', () => {
  beforeAll(prepareFixtureLibrary);
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const submit = async (jobId: string, args: string[]) => {
    const env = await setupDispatcher(directFront, cleanups);
    const body = { jobGraph: await graphFor(jobId, 'default', args), library: Buffer.from(fixtureLibrary().library).toString('base64') };
    return { ...env, res: await env.call('POST', '/jobs', body) };
  };

  it("refuses a job writing into the folder that holds the job file, its input and the user's notes, naming the folder and what it holds; nothing runs and every file stays", async () => {
    const { dir, files } = projectFolder('project');
    const { res, jobStore, blobStore, started } = await submit('into-project', [join(dir, 'input.txt'), dir]);
    expect(res.status).toBe(409);
    expect(res.body.error.message).toContain(`'${dir}'`);
    expect(res.body.error.message).toMatch(/input\.txt/);
    expect(res.body.error.message).toMatch(/no-overwrite/);
    expectIntact(dir, files);
    expect(await jobStore.list()).toEqual([]);
    expect(await blobStore.list('')).toEqual([]);
    expect(started).toEqual([]);
  });

  it('refuses a target that is a regular file, or that lies below one, and leaves the file as it was', async () => {
    const file = join(home, 'results.csv');
    writeFileSync(file, 'a,b\n1,2\n');
    const asFile = await submit('onto-file', [join(home, 'in.txt'), file]);
    expect(asFile.res.status).toBe(409);
    expect(asFile.res.body.error.message).toMatch(/is a regular file/);
    expect(asFile.res.body.error.message).toContain(file);
    const below = await submit('below-file', [join(home, 'in.txt'), join(file, 'out')]);
    expect(below.res.status).toBe(409);
    expect(below.res.body.error.message).toContain(`'${file}' is a regular file`);
    expect(readFileSync(file, 'utf8')).toBe('a,b\n1,2\n');
    expect(asFile.started).toEqual([]);
    expect(below.started).toEqual([]);
  });

  it("with writeMode 'overwrite' accepts a target holding an earlier Floe output, refuses one where other files sit beside it", async () => {
    const out = join(home, 'earlier-output');
    const store = new FsOutputStore();
    const staged = await store.openAttemptStaging(store.attemptStagingLocation(out, 'earlier-job', 'a0'));
    writeFileSync(join(staged, 'part-0'), 'EARLIER\n');
    await store.commit(out, 'earlier-job', 'no-overwrite', ['a0']);
    const overwriting = async (jobId: string) => {
      const graph = await graphFor(jobId, 'default', [join(home, 'in.txt'), out]);
      const jobGraph = {
        ...graph,
        vertices: graph.vertices.map((v) => ({
          ...v,
          operators: v.operators.map((op) => (op.kind === 'sink.textFile' ? { ...op, writeMode: 'overwrite' } : op)),
        })),
      };
      const env = await setupDispatcher(directFront, cleanups);
      return { ...env, res: await env.call('POST', '/jobs', { jobGraph, library: Buffer.from(fixtureLibrary().library).toString('base64') }) };
    };
    const plain = await submit('into-earlier', [join(home, 'in.txt'), out]);
    expect(plain.res.status).toBe(409);
    expect(plain.res.body.error.message).toMatch(/holds the output of Floe job earlier-job .*\{ writeMode: 'overwrite' \}/);
    expect((await overwriting('overwrite-earlier')).res.status).toBe(202);
    writeFileSync(join(out, 'notes.md'), 'mine\n');
    const mixed = await overwriting('overwrite-mixed');
    expect(mixed.res.status).toBe(409);
    expect(mixed.res.body.error.message).toMatch(/'notes\.md'.*never deletes them/);
    expect(mixed.started).toEqual([]);
    expect(readdirSync(out).sort()).toEqual(['_SUCCESS', 'notes.md', 'part-0']);
  });

  it("refuses writeMode 'overwrite' in a checkpointing job, whose file sink commits parts with its checkpoints and never replaces output", async () => {
    const out = join(home, 'checkpointed-output');
    const graph = await graphFor('overwrite-checkpointed', 'default', [join(home, 'in.txt'), out]);
    const jobGraph = {
      ...graph,
      checkpointing: { intervalMs: 500 },
      vertices: graph.vertices.map((v) => ({
        ...v,
        operators: v.operators.map((op) => (op.kind === 'sink.textFile' ? { ...op, writeMode: 'overwrite' } : op)),
      })),
    };
    const env = await setupDispatcher(directFront, cleanups);
    const res = await env.call('POST', '/jobs', { jobGraph, library: Buffer.from(fixtureLibrary().library).toString('base64') });
    expect(res.status).toBe(409);
    expect(res.body.error.message).toContain(`'${out}'`);
    expect(res.body.error.message).toMatch(/writeMode 'overwrite', but the job takes checkpoints.*'no-overwrite'/);
    expect(env.started).toEqual([]);
  });

  it("refuses a submitted graph whose sink or source path holds '..' or is not normalised, naming it", async () => {
    const { dir, files } = projectFolder('climb');
    const graph = await graphFor('climbing', 'default', [join(home, 'in.txt'), join(home, 'fresh-out')]);
    const withPaths = (sink: string, source: string) => ({
      ...graph,
      vertices: graph.vertices.map((v) => ({
        ...v,
        operators: v.operators.map((op) =>
          op.kind === 'sink.textFile' ? { ...op, path: sink } : op.kind === 'source.textFile' ? { ...op, path: source } : op,
        ),
      })),
    });
    const env = await setupDispatcher(directFront, cleanups);
    const library = Buffer.from(fixtureLibrary().library).toString('base64');
    const climbing = `${home}/fresh-out/../climb`;
    const res = await env.call('POST', '/jobs', { jobGraph: withPaths(climbing, `${home}//in.txt`), library });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain(`'${climbing}'`);
    expect(res.body.error.message).toMatch(/'\.\.'/);
    expect(res.body.error.message).toContain(`'${home}//in.txt'`);
    expect(res.body.error.message).toMatch(/normalised/);
    expectIntact(dir, files);
    expect(env.started).toEqual([]);
  });
});
