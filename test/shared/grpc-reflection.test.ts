// @tier: pure
/**
 * shared/grpc-reflection.ts on a real grpc-js server, called by reflection clients of both versions
 * (v1 and v1alpha): services listed; files found by name and by symbol (service, method, nested
 * message, enum) as serialized FileDescriptorProtos with their imports, each import sent once per
 * stream; the descriptors decoded back into a registry that knows the same messages, fields and
 * numbers as the generated code; NOT_FOUND answered on the stream, which stays usable.
 */
import t, { type Test } from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create, createFileRegistry, fromBinary, type DescMessage } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import {
  ServerReflectionRequestSchema,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from '../../proto/gen/grpc/reflection/v1/reflection_pb.js';
import { QuotaAdminService, QuotaSchema, QuotaSyncService } from '../../proto/gen/quota/v1/quota_pb.js';
import { RateLimitRequestSchema, RateLimitService } from '../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { addGrpcReflection, reflectionClientConstructor } from '../../shared/grpc-reflection.js';
import type { MessageInitShape } from '@bufbuild/protobuf';

const server = new grpc.Server();
addGrpcReflection(server, [QuotaAdminService, QuotaSyncService, RateLimitService]);
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
);
t.teardown(() => server.forceShutdown());

/** One reflection stream: each ask writes a request and resolves with the next answer. */
function stream(t: Test, version: 'v1' | 'v1alpha') {
  const Client = reflectionClientConstructor(version);
  const c = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const call = (
    c as unknown as { serverReflectionInfo(): grpc.ClientDuplexStream<ServerReflectionRequest, ServerReflectionResponse> }
  ).serverReflectionInfo();
  const waiting: Array<(r: ServerReflectionResponse) => void> = [];
  call.on('data', (r: ServerReflectionResponse) => waiting.shift()?.(r));
  call.on('error', () => {});
  t.teardown(() => {
    call.end();
    c.close();
  });
  return (req: MessageInitShape<typeof ServerReflectionRequestSchema>['messageRequest']): Promise<ServerReflectionResponse> =>
    new Promise((resolve) => {
      waiting.push(resolve);
      call.write(create(ServerReflectionRequestSchema, { host: 'localhost', messageRequest: req }));
    });
}

function files(r: ServerReflectionResponse): string[] {
  if (r.messageResponse.case !== 'fileDescriptorResponse') throw new Error(`not a file answer: ${r.messageResponse.case}`);
  return r.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name);
}

const fieldsOf = (m: DescMessage) => m.fields.map((f) => [f.name, f.number, f.fieldKind]);

for (const version of ['v1', 'v1alpha'] as const) {
  t.test(`${version}: list_services`, async (t) => {
    const ask = stream(t, version);
    const r = await ask({ case: 'listServices', value: '*' });
    t.equal(r.validHost, 'localhost');
    t.equal(r.originalRequest?.messageRequest.case, 'listServices', 'the request echoed');
    t.same(r.messageResponse.case === 'listServicesResponse' ? r.messageResponse.value.service.map((s) => s.name) : [], [
      'envoy.service.ratelimit.v3.RateLimitService',
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
      'quota.v1.QuotaAdminService',
      'quota.v1.QuotaSyncService',
    ]);
  });
}

t.test('file_containing_symbol: the file and its imports, each once per stream; decoded back into a registry', async (t) => {
  const ask = stream(t, 'v1');
  const first = await ask({ case: 'fileContainingSymbol', value: 'envoy.service.ratelimit.v3.RateLimitService' });
  t.same(
    files(first).sort(),
    [
      'envoy/config/core/v3/base.proto',
      'envoy/extensions/common/ratelimit/v3/ratelimit.proto',
      'envoy/service/ratelimit/v3/rls.proto',
      'envoy/type/v3/ratelimit_unit.proto',
      'google/protobuf/duration.proto',
      'google/protobuf/wrappers.proto',
    ],
    'rls.proto and everything it imports',
  );
  t.equal(files(first)[0], 'envoy/service/ratelimit/v3/rls.proto', 'the asked-for file first');

  // The answer is in grpc-go's order (the file first); a registry wants every import before its importer.
  const pending = (first.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto.map((b) =>
    fromBinary(FileDescriptorProtoSchema, b),
  );
  const ordered: typeof pending = [];
  while (pending.length > 0) {
    const i = pending.findIndex((f) => f.dependency.every((d) => ordered.some((o) => o.name === d)));
    if (i < 0) throw new Error('an import is missing from the answer');
    ordered.push(...pending.splice(i, 1));
  }
  const set = create(FileDescriptorSetSchema, { file: ordered });
  const registry = createFileRegistry(set);
  const decoded = registry.getMessage('envoy.service.ratelimit.v3.RateLimitRequest');
  t.ok(decoded, 'the registry resolves every import');
  t.same(fieldsOf(decoded!), fieldsOf(RateLimitRequestSchema), 'RateLimitRequest: the same fields and numbers as the generated code');
  const descriptor = registry.getMessage('envoy.extensions.common.ratelimit.v3.RateLimitDescriptor');
  t.same(
    descriptor!.fields.map((f) => [f.name, f.number]),
    [
      ['entries', 1],
      ['limit', 2],
      ['hits_addend', 3],
    ],
    'RateLimitDescriptor numbered as Envoy publishes it',
  );

  const again = await ask({ case: 'fileContainingSymbol', value: 'envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus' });
  t.same(files(again), ['envoy/service/ratelimit/v3/rls.proto'], 'a nested message: the same file, its imports not sent again');
  const method = await ask({ case: 'fileContainingSymbol', value: 'quota.v1.QuotaAdminService.Put' });
  t.same(files(method), ['quota/v1/quota.proto'], 'a method');
  const enumeration = await ask({ case: 'fileContainingSymbol', value: '.envoy.type.v3.RateLimitUnit' });
  t.same(files(enumeration), ['envoy/type/v3/ratelimit_unit.proto'], 'an enum, with a leading dot');
});

t.test('file_by_filename, on a v1alpha stream', async (t) => {
  const ask = stream(t, 'v1alpha');
  const r = await ask({ case: 'fileByFilename', value: 'quota/v1/quota.proto' });
  t.same(files(r), ['quota/v1/quota.proto']);
  const file = fromBinary(
    FileDescriptorProtoSchema,
    (r.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto[0]!,
  );
  t.equal(file.package, 'quota.v1');
  const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: [file] }));
  t.same(fieldsOf(registry.getMessage('quota.v1.Quota')!), fieldsOf(QuotaSchema), 'quota.v1.Quota as generated');
});

t.test('not found: an error_response on the stream, which stays usable; extension numbers', async (t) => {
  const ask = stream(t, 'v1');
  for (const req of [
    { case: 'fileByFilename', value: 'nope.proto' },
    { case: 'fileContainingSymbol', value: 'quota.v1.Nope' },
    { case: 'allExtensionNumbersOfType', value: 'quota.v1.Nope' },
    { case: 'fileContainingExtension', value: { containingType: 'quota.v1.Quota', extensionNumber: 100 } },
  ] as const) {
    const r = await ask(req);
    t.same(
      r.messageResponse.case === 'errorResponse' ? r.messageResponse.value.errorCode : undefined,
      grpc.status.NOT_FOUND,
      `${req.case}: NOT_FOUND`,
    );
  }
  const ext = await ask({ case: 'allExtensionNumbersOfType', value: 'quota.v1.Quota' });
  t.same(ext.messageResponse.value, {
    $typeName: 'grpc.reflection.v1.ExtensionNumberResponse',
    baseTypeName: 'quota.v1.Quota',
    extensionNumber: [],
  });
  const list = await ask({ case: 'listServices', value: '' });
  t.equal(list.messageResponse.case, 'listServicesResponse', 'the stream still answers');
});
