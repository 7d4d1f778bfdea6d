// The RPC layer's public surface.
export type { ConnectOptions, Gateway, RpcService, ServeOptions, ServedEndpoint } from './rpc-service.js';
export { EndpointName } from './rpc-service.js';
export { MainThread, MainThreadClosedError } from './main-thread.js';
export { RpcDispatcher, decodeReply, encodeArgs, gatewayProxy, isRpcReply } from './rpc-dispatcher.js';
export type { EncodedReply, RpcReply } from './rpc-dispatcher.js';
export { LocalRpcNetwork, LocalRpcService } from './local-rpc-service.js';
export type { LocalRpcServiceOptions } from './local-rpc-service.js';
export { DEFAULT_MAX_BODY_BYTES, FENCING_TOKEN_HEADER, HttpRpcService } from './http-rpc-service.js';
export type { HttpRpcServiceOptions } from './http-rpc-service.js';
