// The public job API, imported by job files as 'floe'. Kept free of Node-only imports: a copy of it is
// bundled into every job library.
export { defineJob, isJobDefinition } from './job-definition.js';
export { InvalidJobDefinitionError } from './errors.js';
export { SuppressRestartsException } from './suppress-restarts.js';
export type { JobBuilder, JobDefinition } from './job-definition.js';
export { WatermarkStrategy, MIN_WATERMARK, MAX_WATERMARK } from './watermark-strategy.js';
export type { WatermarkGenerator, WatermarkOutput, TimestampAssigner, WatermarkGeneratorContext } from './watermark-strategy.js';
export { StreamEnvironment, DataStream, KeyedStream, OperatorStream, DataStreamSink } from './datastream.js';
export { ExecutionConfig } from './execution-config.js';
export type {
  MapFunction,
  FlatMapFunction,
  FilterFunction,
  KeySelector,
  KeyPrimitive,
  EncodableKey,
  FieldOf,
  NumericField,
  ComparableField,
  ReduceFunction,
  AggregateFunction,
  GeneratorFunction,
} from './functions.js';
export { OutputTag } from './output-tag.js';
export { DataGeneratorSource, RateLimiterStrategy } from './data-generator-source.js';
export { KinesisStreamsSink, KinesisStreamsSinkBuilder, KinesisStreamsSource, KinesisStreamsSourceBuilder, KINESIS_CONNECTOR } from './kinesis.js';
export type { KinesisClientProperties, KinesisDeserializationSchema, KinesisInitialPosition } from './kinesis.js';
export type { Sink, SinkDescriptor, Source, SourceDescriptor } from './connectors.js';
export { DiscardingSink } from './discarding-sink.js';
export type { GenerateOptions, WriteAsTextOptions } from './datastream.js';
export { FileSink, RowFormatBuilder, DefaultRollingPolicy, DefaultRollingPolicyBuilder, SimpleStringEncoder } from './file-sink.js';
export type { Encoder } from './file-sink.js';
export {
  BroadcastStream,
  ConnectedStreams,
  KeyedConnectedStreams,
  BroadcastConnectedStream,
  KeyedBroadcastConnectedStream,
  IntervalJoin,
  IntervalJoined,
  JoinedStreams,
  CoGroupedStreams,
} from './two-input-streams.js';
export { CoProcessFunction, KeyedCoProcessFunction, ProcessJoinFunction, BroadcastProcessFunction, KeyedBroadcastProcessFunction } from './co-functions.js';
export type {
  BaseContext,
  CoMapFunction,
  CoFlatMapFunction,
  CoProcessContext,
  KeyedCoProcessContext,
  KeyedCoProcessOnTimerContext,
  ProcessJoinContext,
  JoinFunction,
  CoGroupFunction,
  ReadOnlyBroadcastState,
  BroadcastState,
  BroadcastReadOnlyContext,
  BroadcastContext,
  KeyedBroadcastReadOnlyContext,
  KeyedBroadcastContext,
  KeyedBroadcastOnTimerContext,
  KeyedStateFunction,
} from './co-functions.js';
export type { ExchangeMode, ExchangeOptions } from './transformation.js';
export type { ResourceProfile } from '../core/resource-profile.js';
export type { RestartStrategySpec, WriteMode } from '../jobgraph/jobgraph.js';
export {
  StateTtlConfig,
  StateTtlConfigBuilder,
  StateTtlUpdateType,
  StateVisibility,
  StateDescriptor,
  ValueStateDescriptor,
  ListStateDescriptor,
  MapStateDescriptor,
  ReducingStateDescriptor,
  AggregatingStateDescriptor,
} from './state.js';
export type { ValueState, ListState, MapState, ReducingState, AggregatingState } from './state.js';
export {
  AbstractRichFunction,
  KeyedProcessFunction,
  ProcessFunction,
  RichMapFunction,
  RichFlatMapFunction,
  RichFilterFunction,
  TimeDomain,
} from './process-function.js';
export type {
  Collector,
  TimerService,
  NonKeyedTimerService,
  OpenContext,
  RuntimeContext,
  RichFunction,
  ProcessContext,
  KeyedContext,
  OnTimerContext,
} from './process-function.js';
export { WindowedStream, AllWindowedStream } from './datastream.js';
export {
  TimeWindow,
  TumblingEventTimeWindows,
  SlidingEventTimeWindows,
  EventTimeSessionWindows,
  TumblingProcessingTimeWindows,
  SlidingProcessingTimeWindows,
  ProcessingTimeSessionWindows,
  EventTimeTrigger,
  ProcessingTimeTrigger,
  CountTrigger,
} from './windowing.js';
export type { WindowAssigner, Trigger } from './windowing.js';
export { ProcessWindowFunction, ProcessAllWindowFunction } from './window-functions.js';
export type { ProcessWindowContext } from './window-functions.js';
export { CheckpointConfig, CheckpointingMode, ExternalizedCheckpointRetention } from './checkpoint-config.js';
