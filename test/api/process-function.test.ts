// process(…) in a JobGraph: a KeyedProcessFunction becomes a keyed operator heading its chain behind a hash
// edge, a ProcessFunction (and a rich map / flatMap / filter) a 'process' operator; the task finds the
// user's object under the operator's id, a new one for each run of the builder.
import { describe, expect, it } from 'vitest';
import {
  defineJob,
  KeyedProcessFunction,
  ProcessFunction,
  RichFilterFunction,
  RichFlatMapFunction,
  RichMapFunction,
  type Collector,
  type KeyedContext,
  type ProcessContext,
} from '../../runtime/api/index.js';
import { InvalidJobDefinitionError } from '../../runtime/api/errors.js';
import { planFingerprint, resolveUserFunctions, runJobBuilder } from '../../runtime/api/program.js';
import { buildJobGraph } from '../../runtime/api/translate.js';
import { parseJobGraph } from '../../runtime/jobgraph/job-graph-schema.js';
import { buildOptions } from '../support/job-graphs.js';

class Count extends KeyedProcessFunction<string, string, [string, number]> {
  processElement(value: string, ctx: KeyedContext<string>, out: Collector<[string, number]>): void {
    out.collect([ctx.getCurrentKey(), value.length]);
  }
}
class Tag extends ProcessFunction<number, string> {
  processElement(value: number, _ctx: ProcessContext, out: Collector<string>): void {
    out.collect(`#${value}`);
  }
}
class Double extends RichMapFunction<number, number> {
  map(value: number): number {
    return value * 2;
  }
}
class Split extends RichFlatMapFunction<string, string> {
  flatMap(value: string, out: Collector<string>): void {
    for (const w of value.split(' ')) out.collect(w);
  }
}
class Long extends RichFilterFunction<string> {
  filter(value: string): boolean {
    return value.length > 2;
  }
}

const job = defineJob('process', (env) => {
  env
    .fromSequence(1, 3)
    .map(new Double())
    .process(new Tag())
    .flatMap(new Split())
    .filter(new Long())
    .keyBy((s) => s)
    .process(new Count())
    .collect();
});

describe('process(…) in the JobGraph', () => {
  it('records a keyed process function behind a hash edge, and process functions and rich functions as process operators', () => {
    const g = buildJobGraph(job, buildOptions());
    expect(g.vertices.map((v) => v.operators.map((o) => `${o.kind}:${o.name}`))).toEqual([
      ['source.sequence:fromSequence', 'process:map', 'process:process', 'process:flatMap', 'process:filter'],
      ['keyed.process:process', 'sink.collect:collect'],
    ]);
    expect(g.edges[0]).toMatchObject({ partitioner: 'hash', keySelector: { operatorId: 'op-6', role: 'key' } });
    expect(g.vertices[1]!.operators[0]).toEqual({
      kind: 'keyed.process',
      id: 'op-6',
      name: 'process',
      key: { export: 'default', operatorId: 'op-6', role: 'key' },
      fn: { export: 'default', operatorId: 'op-6' },
    });
    expect(parseJobGraph(JSON.parse(JSON.stringify(g)))).toEqual(g);
  });

  it("gives the task the user's objects under the operator ids, new ones on each run", () => {
    const fns = resolveUserFunctions({ default: job }, { export: 'default', args: [] });
    expect([...fns.keys()]).toEqual(['op-2', 'op-3', 'op-4', 'op-5', 'op-6.key', 'op-6']);
    const count = fns.get('op-6') as unknown as Count;
    expect(typeof count.processElement).toBe('function');
    expect(count.constructor.name).toBe('Count');
    const again = resolveUserFunctions({ default: job }, { export: 'default', args: [] });
    expect(again.get('op-6')).not.toBe(count);
  });

  it("changes the plan's fingerprint when a process function's class changes", () => {
    class Other extends KeyedProcessFunction<string, string, [string, number]> {
      processElement(value: string, ctx: KeyedContext<string>, out: Collector<[string, number]>): void {
        out.collect([ctx.getCurrentKey(), -value.length]);
      }
    }
    const withFn = (fn: KeyedProcessFunction<string, string, [string, number]>) =>
      defineJob('p', (env) => {
        env
          .fromCollection(['a'])
          .keyBy((s) => s)
          .process(fn)
          .collect();
      });
    const a = planFingerprint(runJobBuilder(withFn(new Count()), []));
    expect(planFingerprint(runJobBuilder(withFn(new Count()), []))).toBe(a);
    expect(planFingerprint(runJobBuilder(withFn(new Other()), []))).not.toBe(a);
  });

  it('refuses what is no process function, saying what it needs', () => {
    const bad = defineJob('bad', (env) => {
      env
        .fromSequence(1, 2)
        .keyBy((n) => n)
        .process({ processElemnt: () => undefined } as never)
        .collect();
    });
    expect(() => buildJobGraph(bad, buildOptions())).toThrow(InvalidJobDefinitionError);
    expect(() => buildJobGraph(bad, buildOptions())).toThrow(/process\(fn\) needs an object with a processElement method .*KeyedProcessFunction/);
    const badMap = defineJob('bad-map', (env) => {
      env
        .fromSequence(1, 2)
        .map({ mapp: () => 1 } as never)
        .collect();
    });
    expect(() => buildJobGraph(badMap, buildOptions())).toThrow(/map\(fn\) needs an object with a map method .*RichMapFunction/);
  });
});
