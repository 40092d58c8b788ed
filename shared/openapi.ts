/**
 * What the services' OpenAPI 3.1 documents share (limiter/control-plane/openapi.ts,
 * notifier/openapi.ts, identity/openapi.ts): a small builder that takes operations keyed the way
 * routes are registered (`GET /internal/quotas/:api_key`), so a document reads like the route
 * table it describes; the problem+json error schema every service answers with
 * (shared/errors.ts); JSON Schemas derived from the protobuf contracts by the same rules as
 * shared/proto-json.ts, so a body that is a contract message is described by the contract itself
 * and cannot drift from it; the operational routes; and the `/openapi.json` route.
 *
 * Decisions (README, "OpenAPI documents"): each service serves its document at `GET
 * /openapi.json` without credentials (it describes routes, it holds no data; tools and the console
 * read it before they have a token). Response schemas of JSON bodies are strict
 * (`additionalProperties: false` where the shape is fixed), so the tests in test/openapi/ notice a
 * field the document does not know.
 */
import { ScalarType, type DescEnum, type DescField, type DescMessage } from '@bufbuild/protobuf';
import { enumJsonNames } from './proto-json.js';
import { route, type EdgeOptions } from './http.js';
import type { TemplatedApp } from './uws.js';

export type Schema = Record<string, unknown>;

export const PROBLEM_CONTENT = 'application/problem+json';

/** The problem+json body of every error (shared/errors.ts `Problem`); `field` names a bad input. */
export const PROBLEM_SCHEMA: Schema = {
  type: 'object',
  required: ['type', 'title', 'status', 'code'],
  properties: {
    type: { type: 'string', description: 'A URI naming the error code (docs/errors.md)' },
    title: { type: 'string' },
    status: { type: 'integer', minimum: 400, maximum: 599 },
    detail: { type: 'string' },
    code: { type: 'string', description: 'The stable error code (shared/error-codes.ts, docs/errors.md)', pattern: '^[a-z][a-z0-9_]*$' },
    field: { type: 'string', description: 'The input at fault (a body field, a query or path parameter)' },
    instance: { type: 'string' },
  },
  additionalProperties: true,
};

const STATUS_TEXT: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '202': 'Accepted',
  '204': 'No content',
  '302': 'Redirect',
  '303': 'See other',
  '400': 'Invalid input (problem+json naming the field)',
  '401': 'No or invalid credentials',
  '403': 'The caller lacks the role',
  '404': 'Not found',
  '409': 'Conflict',
  '413': 'Body too large',
  '415': 'Unsupported media type',
  '422': 'Unprocessable',
  '428': 'Precondition required',
  '429': 'Too many requests',
  '503': 'A dependency (PostgreSQL) is unavailable; retry after Retry-After',
};

export interface ResponseSpec {
  description?: string;
  /** JSON Schema of the body; omitted for a response without one. */
  schema?: Schema;
  /** Default application/json; application/problem+json for a 4xx/5xx without a schema. */
  contentType?: string;
  headers?: Record<string, { description: string; schema?: Schema }>;
}

export interface ParamSpec {
  description?: string;
  schema?: Schema;
  required?: boolean;
  /** A value that reaches the handler (the route tests call each path with it). */
  example?: string;
}

export interface OperationSpec {
  summary: string;
  description?: string;
  tags?: string[];
  /** Names of security schemes, any one of which suffices; [] for none. Default: the document's. */
  security?: string[];
  /** Path parameters by name: described here; any left out are plain strings. */
  path?: Record<string, ParamSpec>;
  query?: Record<string, ParamSpec>;
  headers?: Record<string, ParamSpec>;
  body?: { schema: Schema; contentType?: string; required?: boolean; description?: string };
  /** By status; a status given as a number only means problem+json. */
  responses: Record<string, ResponseSpec>;
  /** Statuses answered with problem+json, added to `responses`. */
  errors?: number[];
}

export interface DocumentSpec {
  title: string;
  version: string;
  description: string;
  /** Security schemes (components.securitySchemes). */
  securitySchemes: Record<string, Schema>;
  /** The schemes operations use unless they say otherwise. */
  security: string[];
  schemas?: Record<string, Schema>;
  operations: Record<string, OperationSpec>;
}

/** `/a/:b/c` → `/a/{b}/c`, and the parameter names. */
export function openApiPath(pattern: string): { path: string; params: string[] } {
  const params: string[] = [];
  const path = pattern.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, (_m, name: string) => {
    params.push(name);
    return `{${name}}`;
  });
  return { path, params };
}

function responseObject(status: string, r: ResponseSpec): Schema {
  const out: Schema = { description: r.description ?? STATUS_TEXT[status] ?? `HTTP ${status}` };
  const problem = Number(status) >= 400;
  if (r.schema !== undefined || problem) {
    // An error without a schema of its own is problem+json; any body with a schema is JSON unless said.
    const type = r.contentType ?? (r.schema === undefined ? PROBLEM_CONTENT : 'application/json');
    out.content = { [type]: { schema: r.schema ?? ref('Problem') } };
  }
  if (r.headers) out.headers = r.headers;
  return out;
}

function param(name: string, where: 'path' | 'query' | 'header', p: ParamSpec): Schema {
  const out: Schema = { name, in: where, schema: p.schema ?? { type: 'string' } };
  if (where === 'path' || p.required) out.required = true;
  if (p.description) out.description = p.description;
  if (p.example !== undefined) out.example = p.example;
  return out;
}

/** `{$ref}` to a schema of components.schemas. */
export function ref(name: string): Schema {
  return { $ref: `#/components/schemas/${name}` };
}

/**
 * The platform is not published under an open-source licence (package.json `"private": true`, no
 * LICENSE file); the document says so rather than leaving the question open. An SPDX expression
 * names a licence outside the SPDX list as `LicenseRef-…`.
 */
const LICENSE: Schema = { name: 'Proprietary: all rights reserved', identifier: 'LicenseRef-Proprietary' };

/** Builds the OpenAPI 3.1 document. */
export function buildDocument(spec: DocumentSpec): Schema {
  const paths: Record<string, Record<string, Schema>> = {};
  for (const [key, op] of Object.entries(spec.operations)) {
    const m = /^(GET|POST|PUT|PATCH|DELETE) (\/\S*)$/.exec(key);
    if (!m) throw new Error(`OpenAPI: bad operation key ${JSON.stringify(key)} (want "METHOD /pattern")`);
    const method = m[1]!.toLowerCase();
    const { path, params } = openApiPath(m[2]!);
    const parameters = [
      ...params.map((n) => param(n, 'path', op.path?.[n] ?? {})),
      ...Object.entries(op.query ?? {}).map(([n, p]) => param(n, 'query', p)),
      ...Object.entries(op.headers ?? {}).map(([n, p]) => param(n, 'header', p)),
    ];
    for (const n of Object.keys(op.path ?? {})) if (!params.includes(n)) throw new Error(`OpenAPI: ${key} has no path parameter ${n}`);
    const responses: Record<string, Schema> = {};
    for (const [status, r] of Object.entries(op.responses)) responses[status] = responseObject(status, r);
    for (const status of op.errors ?? []) responses[String(status)] ??= responseObject(String(status), {});
    const operation: Schema = {
      operationId: operationId(method, m[2]!),
      summary: op.summary,
      responses,
    };
    if (op.description) operation.description = op.description;
    if (op.tags) operation.tags = op.tags;
    if (parameters.length > 0) operation.parameters = parameters;
    if (op.body) {
      operation.requestBody = {
        required: op.body.required ?? true,
        ...(op.body.description ? { description: op.body.description } : {}),
        content: { [op.body.contentType ?? 'application/json']: { schema: op.body.schema } },
      };
    }
    const security = op.security ?? spec.security;
    operation.security = security.map((s) => ({ [s]: [] }));
    (paths[path] ??= {})[method] = operation;
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: { title: spec.title, version: spec.version, description: spec.description, license: LICENSE },
    // Relative: the server is the origin that served this document (each service serves its own at
    // GET /openapi.json, on whatever host and port it was started on), so a client generated from
    // the document fetched from a running service calls that service.
    servers: [{ url: '/', description: 'The service that served this document' }],
    paths,
    components: {
      securitySchemes: spec.securitySchemes,
      schemas: { Problem: PROBLEM_SCHEMA, ...spec.schemas },
    },
  };
}

function operationId(method: string, pattern: string): string {
  const words = pattern
    .split('/')
    .filter((s) => s !== '')
    .map((s) => (s.startsWith(':') ? `by_${s.slice(1)}` : s.replace(/[^A-Za-z0-9]+/g, '_')));
  return [method, ...words].join('_');
}

/** /healthz, /readyz, /metrics (shared/http.ts `operationalRoutes`), unauthenticated. */
export function operationalOperations(): Record<string, OperationSpec> {
  return {
    'GET /healthz': {
      summary: 'Liveness: the process answers',
      tags: ['operations'],
      security: [],
      responses: {
        '200': { schema: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } }, additionalProperties: false } },
      },
    },
    'GET /readyz': {
      summary:
        'Readiness: every dependency check passes (503 names the failing ones, or draining); `detail` names what configuration turned off',
      tags: ['operations'],
      security: [],
      responses: { '200': { schema: ref('Readiness') }, '503': { schema: ref('Readiness'), contentType: 'application/json' } },
    },
    'GET /metrics': {
      summary: 'Prometheus metrics (text exposition format)',
      tags: ['operations'],
      security: [],
      responses: { '200': { schema: { type: 'string' }, contentType: 'text/plain' } },
    },
    'GET /openapi.json': {
      summary: 'This document',
      tags: ['operations'],
      security: [],
      responses: {
        '200': {
          // The fields every OpenAPI 3.1 document of ours has; the rest is left open (this schema
          // does not describe OpenAPI itself).
          schema: {
            type: 'object',
            required: ['openapi', 'info', 'paths'],
            properties: {
              openapi: { type: 'string', pattern: '^3\\.1\\.' },
              info: anyObject,
              servers: { type: 'array' },
              paths: anyObject,
            },
          },
        },
      },
    },
  };
}

/** Schemas the operational routes use. */
export const OPERATIONAL_SCHEMAS: Record<string, Schema> = {
  Readiness: {
    type: 'object',
    required: ['status', 'checks'],
    properties: {
      status: { enum: ['ready', 'not_ready', 'draining'] },
      checks: { type: 'object', additionalProperties: { type: 'string' } },
      // What configuration turned off, each with a sentence; readiness does not depend on it.
      detail: { type: 'object', additionalProperties: { type: 'string' } },
    },
    additionalProperties: false,
  },
};

/** Serves `doc` at `GET /openapi.json`, without credentials (see the module comment). */
export function serveOpenApi(app: TemplatedApp, edge: EdgeOptions, doc: Schema): void {
  const body = JSON.stringify(doc);
  route(app, 'get', '/openapi.json', () => ({ body, contentType: 'application/json', headers: { 'cache-control': 'no-cache' } }), edge);
}

// ── JSON Schemas from the protobuf contracts (the rules of shared/proto-json.ts) ──

// google.protobuf.FeatureSet.FieldPresence.IMPLICIT
const IMPLICIT = 2;

function scalarSchema(t: ScalarType): Schema {
  switch (t) {
    case ScalarType.BOOL:
      return { type: 'boolean' };
    case ScalarType.STRING:
      return { type: 'string' };
    case ScalarType.BYTES:
      return { type: 'string', contentEncoding: 'base64' };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: 'number' };
    case ScalarType.UINT32:
    case ScalarType.UINT64:
    case ScalarType.FIXED32:
    case ScalarType.FIXED64:
      return { type: 'integer', minimum: 0 };
    default:
      return { type: 'integer' };
  }
}

function enumSchema(desc: DescEnum): Schema {
  return { type: 'string', enum: enumJsonNames(desc) };
}

/**
 * The JSON Schemas of `messages` and every message they reference, keyed by full type name
 * (`quota.v1.Quota`), for components.schemas. As written by shared/proto-json.ts `toJson`: a
 * field without presence is always there (so required), except an enum at its zero value, which is
 * never written; a field with presence, a oneof member or a message only when set. No other
 * property is allowed.
 */
export function protoSchemas(...messages: DescMessage[]): Record<string, Schema> {
  const out: Record<string, Schema> = {};
  const visit = (m: DescMessage): void => {
    if (out[m.typeName]) return;
    out[m.typeName] = {};
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const f of m.fields) {
      properties[f.name] = fieldSchema(f, visit);
      if (f.fieldKind === 'list' || f.fieldKind === 'map') required.push(f.name);
      else if (f.fieldKind === 'scalar' && f.presence === IMPLICIT && f.oneof === undefined) required.push(f.name);
    }
    const s: Schema = { type: 'object', properties, additionalProperties: false };
    if (required.length > 0) s.required = required;
    out[m.typeName] = s;
  };
  for (const m of messages) visit(m);
  return out;
}

function fieldSchema(f: DescField, visit: (m: DescMessage) => void): Schema {
  switch (f.fieldKind) {
    case 'scalar':
      return scalarSchema(f.scalar);
    case 'enum':
      return enumSchema(f.enum);
    case 'message':
      visit(f.message);
      return ref(f.message.typeName);
    case 'list':
      if (f.listKind === 'scalar') return { type: 'array', items: scalarSchema(f.scalar) };
      if (f.listKind === 'enum') return { type: 'array', items: enumSchema(f.enum) };
      visit(f.message);
      return { type: 'array', items: ref(f.message.typeName) };
    case 'map': {
      let value: Schema;
      if (f.mapKind === 'scalar') value = scalarSchema(f.scalar);
      else if (f.mapKind === 'enum') value = enumSchema(f.enum);
      else {
        visit(f.message);
        value = ref(f.message.typeName);
      }
      return { type: 'object', additionalProperties: value };
    }
  }
}

/**
 * A request body's schema from a contract message: the same properties (nested messages inline,
 * in the same form), none required: what is required is the service's to say (its validation
 * names the field), and the JSON reader refuses unknown fields, hence no others.
 */
export function protoRequestSchema(message: DescMessage, extra: { omit?: string[]; add?: Record<string, Schema> } = {}): Schema {
  const properties: Record<string, Schema> = {};
  for (const f of message.fields) if (!(extra.omit ?? []).includes(f.name)) properties[f.name] = requestFieldSchema(f, [message.typeName]);
  Object.assign(properties, extra.add ?? {});
  return { type: 'object', properties, additionalProperties: false };
}

function requestMessageSchema(m: DescMessage, seen: string[]): Schema {
  // A contract that refers back to itself is described loosely past the first level.
  if (seen.includes(m.typeName)) return { type: 'object' };
  const properties: Record<string, Schema> = {};
  for (const f of m.fields) properties[f.name] = requestFieldSchema(f, [...seen, m.typeName]);
  return { type: 'object', properties, additionalProperties: false };
}

function requestFieldSchema(f: DescField, seen: string[]): Schema {
  switch (f.fieldKind) {
    case 'scalar':
      return scalarSchema(f.scalar);
    case 'enum':
      return enumSchema(f.enum);
    case 'message':
      return requestMessageSchema(f.message, seen);
    case 'list':
      if (f.listKind === 'scalar') return { type: 'array', items: scalarSchema(f.scalar) };
      if (f.listKind === 'enum') return { type: 'array', items: enumSchema(f.enum) };
      return { type: 'array', items: requestMessageSchema(f.message, seen) };
    case 'map':
      return {
        type: 'object',
        additionalProperties:
          f.mapKind === 'scalar'
            ? scalarSchema(f.scalar)
            : f.mapKind === 'enum'
              ? enumSchema(f.enum)
              : requestMessageSchema(f.message, seen),
      };
  }
}

/** `{type: object}` with these properties, all required, nothing else. */
export function obj(properties: Record<string, Schema>, optional: string[] = []): Schema {
  const required = Object.keys(properties).filter((k) => !optional.includes(k));
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false };
}

/** A string, or null. */
export const nullableString: Schema = { type: ['string', 'null'] };
export const str: Schema = { type: 'string' };
export const int: Schema = { type: 'integer' };
export const num: Schema = { type: 'number' };
export const bool: Schema = { type: 'boolean' };
export const strings: Schema = { type: 'array', items: { type: 'string' } };
/** An object whose shape the document leaves open. */
export const anyObject: Schema = { type: 'object' };
