/**
 * gRPC server reflection (grpc/grpc doc/server-reflection.md), `grpc.reflection.v1` and the older
 * `grpc.reflection.v1alpha` that many clients still call first (grpcurl falls back between them):
 * what lets grpcurl, grpcui or Postman list a server's services and call them with no .proto files.
 *
 * Served from the descriptors protobuf-es generates (every `*_pb.ts` embeds its file descriptor):
 *
 * - `list_services`: the services given, plus Health and the reflection services themselves;
 * - `file_by_filename` (`envoy/service/ratelimit/v3/rls.proto`) and `file_containing_symbol`
 *   (a package-qualified service, method, message, enum or extension name): the file as a serialized
 *   `FileDescriptorProto`, followed by those of its transitive imports that this stream has not
 *   sent yet (the behaviour of grpc-go's server, which clients expect);
 * - `all_extension_numbers_of_type`: the known extensions of a message (none of our messages has
 *   any); `file_containing_extension`: the file declaring that extension;
 * - anything not found: an `error_response` with NOT_FOUND on the stream, which stays open.
 *
 * The two versions are the same messages under two package names, identical on the wire: both are
 * decoded and encoded with the v1 schemas, and only the method path differs.
 *
 * @example
 *   addGrpcReflection(server, [QuotaAdminService, QuotaSyncService, Health]);
 */
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import type { DescEnum, DescExtension, DescFile, DescMessage, DescService } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import {
  ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
  ServerReflection as ServerReflectionV1,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from '../proto/gen/grpc/reflection/v1/reflection_pb.js';
import { ServerReflection as ServerReflectionV1alpha } from '../proto/gen/grpc/reflection/v1alpha/reflection_pb.js';
import { Health } from '../proto/gen/grpc/health/v1/health_pb.js';

/** The reflection services' own names (listed by `list_services`). */
export const REFLECTION_SERVICES = [ServerReflectionV1, ServerReflectionV1alpha] as const;

/** What a server exposes to reflection, indexed once. */
export class ReflectionIndex {
  /** Fully qualified service names, sorted. */
  readonly services: readonly string[];
  private readonly files = new Map<string, DescFile>();
  private readonly symbols = new Map<string, DescFile>();
  private readonly extensions = new Map<string, DescExtension[]>();
  private readonly encoded = new Map<string, Uint8Array>();

  constructor(services: readonly DescService[]) {
    const all = [...services, Health, ...REFLECTION_SERVICES].filter((s, i, a) => a.findIndex((o) => o.typeName === s.typeName) === i);
    this.services = all.map((s) => s.typeName).sort();
    for (const s of all) this.addFile(s.file);
  }

  /** The file named `name` (its path in proto/, e.g. `quota/v1/quota.proto`). */
  file(name: string): DescFile | undefined {
    return this.files.get(name);
  }

  /** The file declaring the fully qualified `symbol` (a leading dot is allowed). */
  fileContaining(symbol: string): DescFile | undefined {
    return this.symbols.get(symbol.startsWith('.') ? symbol.slice(1) : symbol);
  }

  /** The extensions of message type `typeName` known here. */
  extensionsOf(typeName: string): DescExtension[] | undefined {
    const name = typeName.startsWith('.') ? typeName.slice(1) : typeName;
    const known = this.symbols.get(name);
    if (known === undefined) return undefined;
    return this.extensions.get(name) ?? [];
  }

  /** `file` serialized, then its transitive imports, skipping names in `sent` (which is updated). */
  serialized(file: DescFile, sent: Set<string>): Uint8Array[] {
    const out: Uint8Array[] = [];
    const visit = (f: DescFile, root: boolean): void => {
      if (sent.has(f.name + '.proto') && !root) return;
      sent.add(f.name + '.proto');
      out.push(this.bytesOf(f));
      for (const d of f.dependencies) visit(d, false);
    };
    visit(file, true);
    return out;
  }

  private bytesOf(f: DescFile): Uint8Array {
    let b = this.encoded.get(f.name);
    if (b === undefined) {
      b = toBinary(FileDescriptorProtoSchema, f.proto);
      this.encoded.set(f.name, b);
    }
    return b;
  }

  private addFile(f: DescFile): void {
    // DescFile.name is the path without ".proto"; clients ask by the path with it.
    if (this.files.has(f.name + '.proto')) return;
    this.files.set(f.name + '.proto', f);
    for (const s of f.services) {
      this.symbols.set(s.typeName, f);
      for (const m of s.methods) this.symbols.set(`${s.typeName}.${m.name}`, f);
    }
    const addEnum = (e: DescEnum): void => void this.symbols.set(e.typeName, f);
    const addExtension = (x: DescExtension): void => {
      this.symbols.set(x.typeName, f);
      const list = this.extensions.get(x.extendee.typeName) ?? [];
      list.push(x);
      this.extensions.set(x.extendee.typeName, list);
    };
    const addMessage = (m: DescMessage): void => {
      this.symbols.set(m.typeName, f);
      m.nestedMessages.forEach(addMessage);
      m.nestedEnums.forEach(addEnum);
      m.nestedExtensions.forEach(addExtension);
    };
    f.messages.forEach(addMessage);
    f.enums.forEach(addEnum);
    f.extensions.forEach(addExtension);
    for (const d of f.dependencies) this.addFile(d);
  }
}

/** The answer to one reflection request on a stream that has already sent the files in `sent`. */
export function answerReflection(index: ReflectionIndex, req: ServerReflectionRequest, sent: Set<string>): ServerReflectionResponse {
  const base = { validHost: req.host, originalRequest: req };
  const notFound = (what: string): ServerReflectionResponse =>
    create(ServerReflectionResponseSchema, {
      ...base,
      messageResponse: { case: 'errorResponse', value: { errorCode: grpc.status.NOT_FOUND, errorMessage: `${what} not found` } },
    });
  const files = (f: DescFile): ServerReflectionResponse =>
    create(ServerReflectionResponseSchema, {
      ...base,
      messageResponse: { case: 'fileDescriptorResponse', value: { fileDescriptorProto: index.serialized(f, sent) } },
    });
  const r = req.messageRequest;
  switch (r.case) {
    case 'listServices':
      return create(ServerReflectionResponseSchema, {
        ...base,
        messageResponse: { case: 'listServicesResponse', value: { service: index.services.map((name) => ({ name })) } },
      });
    case 'fileByFilename': {
      const f = index.file(r.value);
      return f ? files(f) : notFound(`file ${JSON.stringify(r.value)}`);
    }
    case 'fileContainingSymbol': {
      const f = index.fileContaining(r.value);
      return f ? files(f) : notFound(`symbol ${JSON.stringify(r.value)}`);
    }
    case 'fileContainingExtension': {
      const x = index.extensionsOf(r.value.containingType)?.find((e) => e.number === r.value.extensionNumber);
      return x ? files(x.file) : notFound(`extension ${r.value.extensionNumber} of ${JSON.stringify(r.value.containingType)}`);
    }
    case 'allExtensionNumbersOfType': {
      const list = index.extensionsOf(r.value);
      if (list === undefined) return notFound(`type ${JSON.stringify(r.value)}`);
      return create(ServerReflectionResponseSchema, {
        ...base,
        messageResponse: {
          case: 'allExtensionNumbersResponse',
          value: { baseTypeName: r.value.replace(/^\./, ''), extensionNumber: list.map((e) => e.number) },
        },
      });
    }
    default:
      return create(ServerReflectionResponseSchema, {
        ...base,
        messageResponse: {
          case: 'errorResponse',
          value: { errorCode: grpc.status.INVALID_ARGUMENT, errorMessage: 'the request names no known message_request' },
        },
      });
  }
}

const toBuffer = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** The grpc-js definition of one reflection version's bidirectional ServerReflectionInfo (v1 schemas; same wire). */
export function reflectionDefinition(service: DescService): grpc.ServiceDefinition {
  return {
    serverReflectionInfo: {
      path: `/${service.typeName}/ServerReflectionInfo`,
      originalName: 'ServerReflectionInfo',
      requestStream: true,
      responseStream: true,
      requestSerialize: (m: ServerReflectionRequest) => toBuffer(toBinary(ServerReflectionRequestSchema, m)),
      requestDeserialize: (b: Buffer) => fromBinary(ServerReflectionRequestSchema, b),
      responseSerialize: (m: ServerReflectionResponse) => toBuffer(toBinary(ServerReflectionResponseSchema, m)),
      responseDeserialize: (b: Buffer) => fromBinary(ServerReflectionResponseSchema, b),
    } as grpc.MethodDefinition<ServerReflectionRequest, ServerReflectionResponse>,
  };
}

/**
 * Registers both reflection versions on `server`, describing `services` (the ones it serves;
 * Health and reflection are added). Each stream remembers the files it has sent.
 */
export function addGrpcReflection(server: grpc.Server, services: readonly DescService[]): ReflectionIndex {
  const index = new ReflectionIndex(services);
  const handler = (call: grpc.ServerDuplexStream<ServerReflectionRequest, ServerReflectionResponse>): void => {
    const sent = new Set<string>();
    call.on('data', (req: ServerReflectionRequest) => {
      if (!call.cancelled && !call.writableEnded) call.write(answerReflection(index, req, sent));
    });
    call.on('end', () => call.end());
    call.on('error', () => call.end());
  };
  for (const s of REFLECTION_SERVICES) server.addService(reflectionDefinition(s), { serverReflectionInfo: handler });
  return index;
}

/** A client class for either reflection version (tests, tools). */
export function reflectionClientConstructor(version: 'v1' | 'v1alpha'): grpc.ServiceClientConstructor {
  const s = version === 'v1' ? ServerReflectionV1 : ServerReflectionV1alpha;
  return grpc.makeGenericClientConstructor(reflectionDefinition(s), s.typeName);
}
