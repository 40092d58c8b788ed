/**
 * Helpers for the RLS tests: a real sidecar with its RLS port on 0, a grpc-js client generated from
 * the Envoy contracts (shared/grpc.ts), and a raw client that sends bytes as they are (for the wire
 * fixtures and malformed input: no encoder of ours touches them).
 */
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, type MessageInitShape } from '@bufbuild/protobuf';
import {
  RateLimitRequestSchema,
  RateLimitResponseSchema,
  RateLimitService,
  type RateLimitResponse,
} from '../../../proto/gen/envoy/service/ratelimit/v3/rls_pb.js';
import { GRPC_ERROR_CODE_KEY, GRPC_ERROR_FIELD_KEY, grpcClientConstructor, unaryCall, type GrpcClient } from '../../../shared/grpc.js';
import type { TestContext } from '../../harness/db.js';
import { startTestSidecar, type TestSidecar, type TestSidecarOptions } from '../fixtures/sidecar.js';

export type RlsClient = GrpcClient<typeof RateLimitService>;

/** A sidecar serving the RLS on a free port. */
export async function startRlsSidecar(t: TestContext, opts: TestSidecarOptions = {}): Promise<TestSidecar & { rls: string }> {
  const s = await startTestSidecar(t, { ...opts, env: { LIMITER_RLS_PORT: '0', ...opts.env } });
  if (s.sidecar.rlsPort === undefined) throw new Error('the RLS port is not served');
  return { ...s, rls: `127.0.0.1:${s.sidecar.rlsPort}` };
}

export function rlsClient(t: TestContext, address: string): RlsClient {
  const Client = grpcClientConstructor(RateLimitService);
  const c = new Client(address, grpc.credentials.createInsecure());
  t.teardown(() => c.close());
  return c;
}

/** Descriptors as lists of [key, value] entries, with an optional per-descriptor hits_addend. */
export type Entries = Array<[string, string]>;
export type Descriptor = Entries | { entries: Entries; hitsAddend?: bigint };

export function request(descriptors: Descriptor[], hitsAddend = 0, domain = 'edge'): MessageInitShape<typeof RateLimitRequestSchema> {
  return {
    domain,
    hitsAddend,
    descriptors: descriptors.map((d) => {
      const { entries, hitsAddend: h } = Array.isArray(d) ? { entries: d, hitsAddend: undefined } : d;
      return { entries: entries.map(([key, value]) => ({ key, value })), ...(h === undefined ? {} : { hitsAddend: h }) };
    }),
  };
}

export function shouldRateLimit(c: RlsClient, descriptors: Descriptor[], hitsAddend = 0): Promise<RateLimitResponse> {
  return unaryCall<typeof RateLimitService, 'shouldRateLimit'>(
    c,
    'shouldRateLimit',
    create(RateLimitRequestSchema, request(descriptors, hitsAddend)),
    { timeoutMs: 10_000 },
  );
}

/** The headers of a response as a name → value record (lower-case names). */
export function headersOf(r: RateLimitResponse): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of r.responseHeadersToAdd) out[h.key.toLowerCase()] = h.value;
  return out;
}

export interface GrpcFailure {
  code: grpc.status;
  details: string;
  errorCode: string | undefined;
  field: string | undefined;
}

/** The failure of a call that must fail (rejects when it succeeds). */
export async function failure(p: Promise<unknown>): Promise<GrpcFailure> {
  try {
    await p;
  } catch (err) {
    const e = err as grpc.ServiceError;
    return {
      code: e.code,
      details: e.details,
      errorCode: e.metadata?.get(GRPC_ERROR_CODE_KEY)[0]?.toString(),
      field: e.metadata?.get(GRPC_ERROR_FIELD_KEY)[0]?.toString(),
    };
  }
  throw new Error('the call succeeded');
}

/** Sends `bytes` as the ShouldRateLimit request message exactly as given; resolves with the raw answer. */
export function rawShouldRateLimit(
  t: TestContext,
  address: string,
  bytes: Uint8Array,
): Promise<{ response?: Buffer; error?: grpc.ServiceError }> {
  const c = new grpc.Client(address, grpc.credentials.createInsecure());
  t.teardown(() => c.close());
  return new Promise((resolve) => {
    c.makeUnaryRequest(
      '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.from(bytes),
      new grpc.Metadata(),
      { deadline: Date.now() + 10_000 },
      (error, response) => resolve(error ? { error } : { response: response! }),
    );
  });
}

export function decodeResponse(b: Buffer): RateLimitResponse {
  return fromBinary(RateLimitResponseSchema, b);
}
