/**
 * gRPC for the protobuf-es contracts: builds @grpc/grpc-js service definitions and typed client
 * constructors from the generated service descriptors (e.g. `QuotaAdminService` from
 * proto/gen/quota/v1/quota_pb.ts), with protobuf-es `toBinary`/`fromBinary` as the serializers,
 * and maps our errors to gRPC status codes (the one mapping to the wire for gRPC edges).
 *
 * Unary and server-streaming methods are supported (the contracts use no others).
 *
 * Method names are the descriptor's `localName` (lowerCamelCase: `put`, `watch`); the wire path is
 * `/<package>.<Service>/<Method>` (e.g. `/quota.v1.QuotaAdminService/Put`).
 *
 * @example
 *   const server = new grpc.Server();
 *   addGrpcService(server, QuotaAdminService, { put: (call, cb) => cb(null, create(PutResponseSchema, ...)), ... });
 *   const Client = grpcClientConstructor(QuotaAdminService);
 *   const client = new Client('127.0.0.1:50051', grpc.credentials.createInsecure());
 *   const res = await unaryCall(client, 'get', create(GetRequestSchema, { subjectId }));
 */
import * as grpc from '@grpc/grpc-js';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import type { DescMessage, DescMethod, DescService, MessageShape } from '@bufbuild/protobuf';
import { isForCaller } from './errors.js';

type MethodsOf<S extends DescService> = S['method'];
type InputOf<M> = M extends { input: infer I extends DescMessage } ? MessageShape<I> : never;
type OutputOf<M> = M extends { output: infer O extends DescMessage } ? MessageShape<O> : never;

/** The handlers a server supplies for service `S`, keyed by method localName. */
export type GrpcServiceImplementation<S extends DescService> = {
  [K in keyof MethodsOf<S>]: MethodsOf<S>[K] extends { methodKind: 'unary' }
    ? grpc.handleUnaryCall<InputOf<MethodsOf<S>[K]>, OutputOf<MethodsOf<S>[K]>>
    : MethodsOf<S>[K] extends { methodKind: 'server_streaming' }
      ? grpc.handleServerStreamingCall<InputOf<MethodsOf<S>[K]>, OutputOf<MethodsOf<S>[K]>>
      : never;
};

/** A unary method on a generated client (grpc-js callback style). */
export interface UnaryClientMethod<I, O> {
  (request: I, callback: grpc.requestCallback<O>): grpc.ClientUnaryCall;
  (request: I, metadata: grpc.Metadata, callback: grpc.requestCallback<O>): grpc.ClientUnaryCall;
  (request: I, metadata: grpc.Metadata, options: Partial<grpc.CallOptions>, callback: grpc.requestCallback<O>): grpc.ClientUnaryCall;
}

/** A server-streaming method on a generated client. */
export interface ServerStreamingClientMethod<I, O> {
  (request: I, options?: Partial<grpc.CallOptions>): grpc.ClientReadableStream<O>;
  (request: I, metadata?: grpc.Metadata, options?: Partial<grpc.CallOptions>): grpc.ClientReadableStream<O>;
}

/** A grpc-js client for service `S`: a `grpc.Client` plus one method per RPC, by localName. */
export type GrpcClient<S extends DescService> = grpc.Client & {
  [K in keyof MethodsOf<S>]: MethodsOf<S>[K] extends { methodKind: 'unary' }
    ? UnaryClientMethod<InputOf<MethodsOf<S>[K]>, OutputOf<MethodsOf<S>[K]>>
    : MethodsOf<S>[K] extends { methodKind: 'server_streaming' }
      ? ServerStreamingClientMethod<InputOf<MethodsOf<S>[K]>, OutputOf<MethodsOf<S>[K]>>
      : never;
};

export type GrpcClientConstructor<S extends DescService> = new (
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
) => GrpcClient<S>;

/** Names of the unary methods of `S`. */
export type UnaryMethodName<S extends DescService> = {
  [K in keyof MethodsOf<S>]: MethodsOf<S>[K] extends { methodKind: 'unary' } ? K : never;
}[keyof MethodsOf<S>] &
  string;

const definitions = new WeakMap<DescService, grpc.ServiceDefinition>();
const constructors = new WeakMap<DescService, grpc.ServiceClientConstructor>();

/**
 * The grpc-js service definition of a protobuf-es service descriptor.
 *
 * @throws Error when the service has a client-streaming or bidirectional method.
 */
export function grpcServiceDefinition<S extends DescService>(service: S): grpc.ServiceDefinition<GrpcServiceImplementation<S>> {
  let def = definitions.get(service);
  if (def === undefined) {
    const built: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
    for (const method of service.methods) built[method.localName] = methodDefinition(service, method);
    def = built;
    definitions.set(service, def);
  }
  return def as grpc.ServiceDefinition<GrpcServiceImplementation<S>>;
}

/** Registers `implementation` for `service` on a grpc-js server. */
export function addGrpcService<S extends DescService>(server: grpc.Server, service: S, implementation: GrpcServiceImplementation<S>): void {
  server.addService(grpcServiceDefinition(service), implementation);
}

/** A typed client class for `service` (grpc.makeGenericClientConstructor over its definition). */
export function grpcClientConstructor<S extends DescService>(service: S): GrpcClientConstructor<S> {
  let ctor = constructors.get(service);
  if (ctor === undefined) {
    ctor = grpc.makeGenericClientConstructor(grpcServiceDefinition(service), service.typeName);
    constructors.set(service, ctor);
  }
  return ctor as unknown as GrpcClientConstructor<S>;
}

export interface UnaryCallOptions {
  metadata?: grpc.Metadata;
  /** Milliseconds from now after which the call fails with DEADLINE_EXCEEDED. */
  timeoutMs?: number;
}

/** Calls a unary method and resolves with its response (rejects with the grpc-js ServiceError). */
export function unaryCall<S extends DescService, K extends UnaryMethodName<S>>(
  client: GrpcClient<S>,
  method: K,
  request: InputOf<MethodsOf<S>[K]>,
  options: UnaryCallOptions = {},
): Promise<OutputOf<MethodsOf<S>[K]>> {
  const fn = (client as unknown as Record<string, UnaryClientMethod<unknown, OutputOf<MethodsOf<S>[K]>>>)[method];
  if (fn === undefined) throw new Error(`grpc: no method ${method}`);
  const callOptions: Partial<grpc.CallOptions> = options.timeoutMs === undefined ? {} : { deadline: Date.now() + options.timeoutMs };
  return new Promise((resolve, reject) => {
    fn.call(client, request, options.metadata ?? new grpc.Metadata(), callOptions, (err, res) => {
      if (err) reject(err);
      else resolve(res as OutputOf<MethodsOf<S>[K]>);
    });
  });
}

/** Metadata keys carrying our stable error code and the field at fault on a gRPC error. */
export const GRPC_ERROR_CODE_KEY = 'error-code';
export const GRPC_ERROR_FIELD_KEY = 'error-field';

/**
 * Maps any thrown value to a gRPC error for a unary handler's callback (streams: {@link failStream}).
 * A PlatformError keeps its detail and carries its code (and field) in trailing metadata;
 * anything else (an InternalError, an OAuthError, a bug) becomes INTERNAL with a generic message,
 * its cause left for the log.
 */
export function toGrpcError(err: unknown): grpc.ServerErrorResponse {
  const metadata = new grpc.Metadata();
  if (!isForCaller(err)) {
    metadata.set(GRPC_ERROR_CODE_KEY, 'internal');
    return Object.assign(new Error('internal error'), { code: grpc.status.INTERNAL, details: 'internal error', metadata });
  }
  metadata.set(GRPC_ERROR_CODE_KEY, err.code);
  if (err.field !== undefined) metadata.set(GRPC_ERROR_FIELD_KEY, err.field);
  const details = err.detail ?? err.message;
  return Object.assign(new Error(details), { code: grpcStatusFor(err.status), details, metadata });
}

/**
 * Ends a server stream with an error mapped by {@link toGrpcError}. (grpc-js sends the status on an
 * `error` event; `destroy(err)` would drop it.)
 */
export function failStream(call: grpc.ServerWritableStream<unknown, unknown>, err: unknown): void {
  call.emit('error', toGrpcError(err));
}

/** The gRPC status code for an HTTP status (our error codes carry an HTTP status). */
export function grpcStatusFor(httpStatus: number): grpc.status {
  switch (httpStatus) {
    case 400:
    case 413:
    case 415:
    case 431:
      return grpc.status.INVALID_ARGUMENT;
    case 401:
      return grpc.status.UNAUTHENTICATED;
    case 403:
      return grpc.status.PERMISSION_DENIED;
    case 404:
      return grpc.status.NOT_FOUND;
    case 405:
    case 501:
      return grpc.status.UNIMPLEMENTED;
    case 409:
      return grpc.status.ABORTED;
    case 412:
      return grpc.status.FAILED_PRECONDITION;
    case 429:
      return grpc.status.RESOURCE_EXHAUSTED;
    case 502:
    case 503:
      return grpc.status.UNAVAILABLE;
    case 504:
      return grpc.status.DEADLINE_EXCEEDED;
    default:
      return httpStatus >= 400 && httpStatus < 500 ? grpc.status.FAILED_PRECONDITION : grpc.status.INTERNAL;
  }
}

function methodDefinition(service: DescService, method: DescMethod): grpc.MethodDefinition<unknown, unknown> {
  if (method.methodKind !== 'unary' && method.methodKind !== 'server_streaming') {
    throw new Error(`grpc: ${service.typeName}.${method.name} is ${method.methodKind}; only unary and server_streaming are supported`);
  }
  const { input, output } = method;
  return {
    path: `/${service.typeName}/${method.name}`,
    originalName: method.name,
    requestStream: false,
    responseStream: method.methodKind === 'server_streaming',
    requestSerialize: (msg) => toBuffer(toBinary(input, msg as MessageShape<typeof input>)),
    requestDeserialize: (bytes) => fromBinary(input, bytes),
    responseSerialize: (msg) => toBuffer(toBinary(output, msg as MessageShape<typeof output>)),
    responseDeserialize: (bytes) => fromBinary(output, bytes),
  };
}

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
