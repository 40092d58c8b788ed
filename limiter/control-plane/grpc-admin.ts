/**
 * gRPC quota.v1.QuotaAdminService: Put, Get, Delete, List, admin-only (see auth.ts). Errors carry
 * their stable code and the field at fault in trailing metadata (`error-code`, `error-field`):
 * INVALID_ARGUMENT for a bad record, NOT_FOUND for an unknown subject, UNAUTHENTICATED /
 * PERMISSION_DENIED, UNAVAILABLE when PostgreSQL is.
 *
 * Put's `ack_timeout_ms` 0 (unset) waits the configured CONTROL_PLANE_ACK_TIMEOUT.
 */
import { create } from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';
import {
  DeleteResponseSchema,
  GetResponseSchema,
  ListResponseSchema,
  PutResponseSchema,
  type QuotaAdminService,
} from '../../proto/gen/quota/v1/quota_pb.js';
import { invalidField, isPlatformError } from '../../shared/errors.js';
import { toGrpcError, type GrpcServiceImplementation } from '../../shared/grpc.js';
import type { Logger } from '../../shared/log.js';
import type { QuotaAdmin } from './admin.js';
import type { Authenticator, Principal } from './auth.js';
import type { ControlPlaneMetrics } from './metrics.js';

export interface GrpcAdminDeps {
  admin: QuotaAdmin;
  auth: Authenticator;
  metrics: ControlPlaneMetrics;
  log: Logger;
}

/** The `authorization` metadata value of a call, if any. */
export function authorizationOf(call: { metadata: grpc.Metadata }): string | undefined {
  const v = call.metadata.get('authorization')[0];
  return typeof v === 'string' ? v : undefined;
}

export function principalName(p: Principal): string {
  return p.kind === 'access_token' ? `jwt:${p.sub}` : p.kind;
}

export function grpcAdminService(deps: GrpcAdminDeps): GrpcServiceImplementation<typeof QuotaAdminService> {
  const { admin } = deps;
  const unary =
    <Req, Res>(method: string, run: (req: Req, by: string) => Promise<Res>): grpc.handleUnaryCall<Req, Res> =>
    (call, callback) => {
      void (async () => {
        try {
          const principal = await deps.auth.admin(authorizationOf(call));
          const res = await run(call.request, principalName(principal));
          deps.metrics.adminCalls.inc({ method, transport: 'grpc', code: 'ok' });
          callback(null, res);
        } catch (err) {
          const code = isPlatformError(err) ? err.code : 'internal';
          deps.metrics.adminCalls.inc({ method, transport: 'grpc', code });
          if (!isPlatformError(err) || err.status >= 500) deps.log.error({ err, method }, 'admin call failed');
          callback(toGrpcError(err));
        }
      })();
    };

  return {
    put: unary('put', async (req, by) => {
      if (!req.quota) throw invalidField('quota', 'required');
      const r = await admin.put(req.quota, { fieldPrefix: 'quota.', ackTimeoutMs: req.ackTimeoutMs, by });
      return create(PutResponseSchema, {
        quota: r.quota,
        version: BigInt(r.version),
        ackedSidecarIds: r.acked,
        laggingSidecarIds: r.lagging,
      });
    }),
    get: unary('get', async (req) => create(GetResponseSchema, { quota: await admin.get(req.subjectId) })),
    delete: unary('delete', async (req, by) => {
      const r = await admin.delete(req.subjectId, { ackTimeoutMs: req.ackTimeoutMs, by });
      return create(DeleteResponseSchema, {
        deleted: r.deleted,
        version: BigInt(r.version),
        ackedSidecarIds: r.acked,
        laggingSidecarIds: r.lagging,
      });
    }),
    list: unary('list', async (req) => create(ListResponseSchema, await admin.list(req.pageSize, req.pageToken))),
  };
}
