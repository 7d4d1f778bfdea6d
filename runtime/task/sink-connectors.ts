// Sinks of connectors (Flink's `sinkTo`): a connector registers a factory under its name, and a task
// whose chain ends in a 'sink.connector' operator opens its sink through it. Entry points register the
// connectors they offer (as they register file systems), so this layer never imports one; the discarding
// sink is built in.
import { DISCARDING_SINK_CONNECTOR } from '../api/discarding-sink.js';
import type { FunctionRef, OperatorSpec } from '../jobgraph/jobgraph.js';
import type { TaskDeploymentDescriptor } from '../protocol/task-deployment.js';
import type { Emit } from './task-io.js';

export type ConnectorSinkSpec = Extract<OperatorSpec, { kind: 'sink.connector' }>;

export interface SinkConnectorContext {
  readonly tdd: TaskDeploymentDescriptor;
  readonly operator: ConnectorSinkSpec;
  /** The sink's user function of `role` (e.g. 'serialize'); undefined when the sink has none of that role. */
  userFunction(role: string): ((...args: unknown[]) => unknown) | undefined;
}

/** A connector's sink: records in through `emit`; close() once the input ended (flushing), abort() when the task stops early. */
export interface ConnectorSink {
  readonly emit: Emit;
  close(): Promise<void>;
  abort(): Promise<void>;
  /**
   * Delivers everything emitted so far (Flink's flush at a checkpoint): a checkpointing job calls it at each
   * checkpoint's barrier and acknowledges once it resolved, so a restore from that checkpoint loses nothing
   * (records after it are written again: at-least-once).
   */
  flush?(): Promise<void>;
}

export type SinkConnectorFactory = (context: SinkConnectorContext) => Promise<ConnectorSink>;

const factories = new Map<string, SinkConnectorFactory>();

export function registerSinkConnector(connector: string, factory: SinkConnectorFactory): void {
  factories.set(connector, factory);
}

export const sinkConnectorFactory = (connector: string): SinkConnectorFactory | undefined => factories.get(connector);

// Built in: Flink's DiscardingSink drops every record (the chain has counted it by then).
const discarding: ConnectorSink = { emit: () => undefined, close: async () => undefined, abort: async () => undefined };
registerSinkConnector(DISCARDING_SINK_CONNECTOR, async () => discarding);

/** The ref of the sink's function of `role`. */
export const sinkFunctionRef = (op: ConnectorSinkSpec, role: string): FunctionRef | undefined => op.fns.find((f) => (f.role ?? '') === role);
