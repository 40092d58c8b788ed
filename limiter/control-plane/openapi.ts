/**
 * The OpenAPI 3.1 document of the control plane's HTTP API (http-api.ts), served at
 * `/openapi.json`. Quota records are described by the contract (proto/quota/v1/quota.proto) through
 * shared/openapi.ts, so a field added there is in this document without an edit here. The gRPC
 * services (QuotaAdminService, QuotaSyncService) are described by that .proto, not here.
 */
import { GetResponseSchema, PutResponseSchema, QuotaSchema } from '../../proto/gen/quota/v1/quota_pb.js';
import {
  bool,
  buildDocument,
  int,
  obj,
  OPERATIONAL_SCHEMAS,
  operationalOperations,
  protoRequestSchema,
  protoSchemas,
  ref,
  str,
  type OperationSpec,
  type Schema,
} from '../../shared/openapi.js';
import { SUBJECT_KINDS } from './subject.js';

const QUOTA_BODY = protoRequestSchema(QuotaSchema, { omit: ['subject_id', 'version', 'updated_at'] });
QUOTA_BODY.description =
  'The whole record (a PUT replaces it): algorithm, rate, burst and unit (or interval_ms) are required unless it is a plan reference (rate 0 and plan); cost, fail_mode, shadow, plan and routes are optional. subject_id, version and updated_at are refused (400 naming them).';

const ACK_TIMEOUT = {
  ack_timeout_ms: {
    description: 'How long to wait for the connected sidecars to ack the new version (default CONTROL_PLANE_ACK_TIMEOUT; at most 60000)',
    schema: { type: 'integer', minimum: 0, maximum: 60000 },
  },
};

const API_KEY_PATH = {
  api_key: {
    description: 'The raw API key; hashed on arrival (only key:<sha256 hex> is stored, shown or logged)',
    example: 'sk_test_example',
  },
};
const SUBJECT_PATH = {
  subject: {
    description: 'A subject id, URL-encoded: key:<sha256 hex>, user:<id>, tenant:<id> or plan:<name> (e.g. user%3A42)',
    example: 'user:42',
  },
};

const DELETED = {
  description: 'Deleted',
  headers: { 'quota-version': { description: 'The table version of the delete', schema: { type: 'string', pattern: '^[0-9]+$' } } },
};

function crud(
  pattern: string,
  path: Record<string, { description: string; example: string }>,
  what: string,
): Record<string, OperationSpec> {
  return {
    [`PUT ${pattern}`]: {
      summary: `Create or replace the quota of ${what}, and wait for the sidecars to ack it`,
      tags: ['quotas'],
      path,
      query: ACK_TIMEOUT,
      body: { schema: QUOTA_BODY },
      responses: {
        '200': { description: 'Replaced', schema: ref('quota.v1.PutResponse') },
        '201': { description: 'Created', schema: ref('quota.v1.PutResponse') },
      },
      errors: [400, 401, 403, 413, 415, 503],
    },
    [`GET ${pattern}`]: {
      summary: `The quota of ${what}`,
      tags: ['quotas'],
      path,
      responses: { '200': { schema: ref('quota.v1.GetResponse') } },
      errors: [400, 401, 403, 404, 503],
    },
    [`DELETE ${pattern}`]: {
      summary: `Delete the quota of ${what} (a plan only once nothing references it)`,
      tags: ['quotas'],
      path,
      query: ACK_TIMEOUT,
      responses: { '204': DELETED },
      errors: [400, 401, 403, 404, 503],
    },
  };
}

const operations: Record<string, OperationSpec> = {
  ...crud('/internal/quotas/:api_key', API_KEY_PATH, 'a raw API key'),
  ...crud('/internal/subjects/:subject/quota', SUBJECT_PATH, 'a subject of any kind'),
  'GET /internal/quotas': {
    summary: 'A page of quota records in subject order (bytewise), narrowed by kind and prefix',
    tags: ['quotas'],
    query: {
      subject_kind: { description: 'Only subjects of this kind', schema: { enum: [...SUBJECT_KINDS] } },
      prefix: { description: 'Only subject ids starting with this (the whole id: user:4); must agree with subject_kind' },
      cursor: { description: "The previous page's next_cursor (opaque)" },
      limit: { description: 'Records per page (default 100)', schema: { type: 'integer', minimum: 1, maximum: 1000 } },
    },
    responses: {
      '200': {
        schema: obj({ quotas: { type: 'array', items: ref('quota.v1.Quota') }, next_cursor: { type: ['string', 'null'] } }),
      },
    },
    errors: [400, 401, 403, 503],
  },
  'GET /internal/sidecars': {
    summary: 'The sidecars streaming from any replica, and the version each acked',
    tags: ['sidecars'],
    responses: {
      '200': {
        schema: obj({
          version: { ...int, description: "The table's current version" },
          sidecars: {
            type: 'array',
            items: obj({
              sidecar_id: str,
              acked_version: int,
              local: { ...bool, description: 'It streams from the replica that answered' },
              lagging: { ...bool, description: 'Its acked version is behind the table' },
            }),
          },
        }),
      },
    },
    errors: [401, 403, 503],
  },
  ...operationalOperations(),
};

const schemas: Record<string, Schema> = {
  ...protoSchemas(PutResponseSchema, GetResponseSchema, QuotaSchema),
  ...OPERATIONAL_SCHEMAS,
};

export const controlPlaneOpenApi = buildDocument({
  title: 'Quota control plane: internal HTTP API',
  version: '1',
  description:
    'Admin-only quota records of every subject kind, and the connected sidecars (limiter/control-plane/README.md). Errors are application/problem+json naming the field at fault. The gRPC admin and sync services are described by proto/quota/v1/quota.proto.',
  securitySchemes: {
    adminBearer: {
      type: 'http',
      scheme: 'bearer',
      description: 'ADMIN_TOKEN, or an access token of identity whose role is admin',
    },
  },
  security: ['adminBearer'],
  schemas,
  operations,
});
