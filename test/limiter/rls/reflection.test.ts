// @tier: pure
/**
 * What grpcurl does, with another protobuf implementation than ours: ask the sidecar's RLS port by
 * reflection for the file declaring RateLimitService, hand the FileDescriptorProtos it returns to
 * @grpc/proto-loader (protobufjs, the loader grpc-js itself ships with), build a client from that
 * alone, and call ShouldRateLimit through it. Nothing on the client side comes from our contracts
 * or our encoder: the FileDescriptorSet is assembled here byte by byte (field 1, length-delimited).
 */
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { loadFileDescriptorSetFromBuffer } from '@grpc/proto-loader';
import { create } from '@bufbuild/protobuf';
import { ServerReflectionRequestSchema, type ServerReflectionResponse } from '../../../proto/gen/grpc/reflection/v1/reflection_pb.js';
import { reflectionClientConstructor } from '../../../shared/grpc-reflection.js';
import { startUpstream } from '../../harness/upstream.js';
import { fixedQuota, keySubject, newApiKey } from '../fixtures/sidecar.js';
import { startRlsSidecar } from './fixtures.js';

/** Protobuf varint, for the FileDescriptorSet's length prefixes. */
function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

t.test('a client built only from reflection calls ShouldRateLimit', async (t) => {
  const up = await startUpstream();
  t.teardown(() => up.close());
  const key = newApiKey('reflected');
  const s = await startRlsSidecar(t, { upstream: up.url, quotas: [fixedQuota(keySubject(key), 2, { plan: 'gold' })] });

  const Reflection = reflectionClientConstructor('v1');
  const rc = new Reflection(s.rls, grpc.credentials.createInsecure());
  const stream = (
    rc as unknown as { serverReflectionInfo(): grpc.ClientDuplexStream<unknown, ServerReflectionResponse> }
  ).serverReflectionInfo();
  stream.on('error', () => {});
  t.teardown(() => {
    stream.end();
    rc.close();
  });
  const answer = new Promise<ServerReflectionResponse>((resolve) => stream.once('data', resolve));
  stream.write(
    create(ServerReflectionRequestSchema, {
      messageRequest: { case: 'fileContainingSymbol', value: 'envoy.service.ratelimit.v3.RateLimitService' },
    }),
  );
  const r = await answer;
  if (r.messageResponse.case !== 'fileDescriptorResponse') throw new Error(`no files: ${r.messageResponse.case}`);
  const files = r.messageResponse.value.fileDescriptorProto;
  const set = Buffer.from(files.flatMap((f) => [0x0a, ...varint(f.length), ...f]));

  const definition = loadFileDescriptorSetFromBuffer(set, { enums: String, longs: String, defaults: true });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  };
  const Rls = pkg.envoy.service.ratelimit.v3.RateLimitService;
  const c = new Rls(s.rls, grpc.credentials.createInsecure());
  t.teardown(() => c.close());
  const call = (): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) =>
      (
        c as unknown as { ShouldRateLimit: (req: object, cb: (err: Error | null, res: Record<string, unknown>) => void) => void }
      ).ShouldRateLimit({ domain: 'edge', descriptors: [{ entries: [{ key: 'api_key', value: key }] }], hits_addend: 1 }, (err, res) =>
        err ? reject(err) : resolve(res),
      ),
    );
  const codes = [];
  let first: Record<string, unknown> | undefined;
  for (let i = 0; i < 3; i++) {
    const res = await call();
    first ??= res;
    codes.push(res.overall_code);
  }
  t.same(codes, ['OK', 'OK', 'OVER_LIMIT'], 'enum names as Envoy spells them; burst 2');
  const status = (first!.statuses as Array<Record<string, unknown>>)[0]!;
  t.same(status.current_limit, { name: 'gold', requests_per_unit: 2, unit: 'HOUR' }, 'current_limit with Envoy’s field names');
  t.equal(status.limit_remaining, 1);
  t.ok(
    (first!.response_headers_to_add as Array<{ key: string }>).some((h) => h.key === 'x-ratelimit-limit'),
    'response_headers_to_add as HeaderValues',
  );
});
