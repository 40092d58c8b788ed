/**
 * Checking a service's OpenAPI document (served at /openapi.json) against the service itself:
 * - routes both ways: every route the service registered (shared/service.ts `routesServedOn`) is
 *   documented, and every documented operation reaches a handler (called without credentials
 *   with its parameters' examples: never the router's own 404 `no resource at` or 405);
 * - recorded responses: real answers validated against the document's schema for their status and
 *   content type, with a JSON Schema 2020-12 validator (ajv), so an undocumented status, content
 *   type or field fails.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { Test } from 'tap';
import { routesServedOn } from '../../shared/service.js';

export type Doc = Record<string, unknown> & { paths: Record<string, Record<string, Operation>> };

interface Operation {
  parameters?: { name: string; in: string; example?: string }[];
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
}

export interface Recorded {
  status: number;
  contentType: string;
  body: unknown;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const DOC_ID = 'https://openapi.test/doc.json';

/** GET /openapi.json without credentials: 200 JSON, OpenAPI 3.1. */
export async function fetchDocument(t: Test, base: string): Promise<Doc> {
  const res = await fetch(`${base}/openapi.json`);
  t.equal(res.status, 200, '/openapi.json answers without credentials');
  t.match(res.headers.get('content-type'), /^application\/json/);
  const doc = (await res.json()) as Doc;
  t.equal(doc.openapi, '3.1.0');
  t.same(schemaProblems(doc), [], 'every operation has a unique operationId, and every schema compiles with its references resolved');
  return doc;
}

/** What is wrong with the document as a whole: duplicate operationIds, schemas that do not compile. */
export function schemaProblems(doc: Doc): string[] {
  const ajv = new Ajv2020({ strict: false, validateFormats: false });
  ajv.addSchema({ ...doc, $id: DOC_ID });
  const problems: string[] = [];
  const ids = new Set<string>();
  const pointer = (parts: string[]): string =>
    `${DOC_ID}#/${parts.map((s) => encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/')}`;
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      const id = (op as { operationId?: string }).operationId;
      if (!id || ids.has(id)) problems.push(`${method} ${path}: operationId ${String(id)} missing or repeated`);
      ids.add(id ?? '');
      for (const [status, r] of Object.entries(op.responses)) {
        for (const ct of Object.keys(r.content ?? {})) {
          try {
            ajv.compile({ $ref: pointer(['paths', path, method, 'responses', status, 'content', ct, 'schema']) });
          } catch (err) {
            problems.push(`${method} ${path} ${status} ${ct}: ${(err as Error).message}`);
          }
        }
      }
    }
  }
  return problems;
}

/** `METHOD /pattern` of every operation, with `{name}` written back as `:name`. */
export function documentedRoutes(doc: Doc): string[] {
  const out: string[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const m of Object.keys(item)) if (METHODS.includes(m)) out.push(`${m.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ':$1')}`);
  }
  return out.sort();
}

/**
 * Both ways: the service's registered routes equal the documented ones, and each documented path,
 * called with its examples and no credentials, is answered by a handler.
 */
export async function checkRoutes(t: Test, doc: Doc, port: number): Promise<void> {
  const served = routesServedOn(port);
  if (!served) throw new Error(`no HTTP service of this process listens on ${port}`);
  const servedKeys = served.map((r) => `${r.method} ${r.pattern}`).sort();
  const documented = documentedRoutes(doc);
  t.same(
    servedKeys.filter((k) => !documented.includes(k)),
    [],
    'no route is served without being documented',
  );
  t.same(
    documented.filter((k) => !servedKeys.includes(k)),
    [],
    'no documented route is missing from the service',
  );
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      const url = path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
        const p = op.parameters?.find((x) => x.in === 'path' && x.name === name);
        return encodeURIComponent(p?.example ?? 'x');
      });
      const res = await fetch(`http://127.0.0.1:${port}${url}`, { method: method.toUpperCase(), redirect: 'manual' });
      const text = await res.text();
      const routerMiss =
        (res.status === 404 && text.includes('no resource at')) || (res.status === 405 && text.includes('method_not_allowed'));
      t.notOk(routerMiss, `${method.toUpperCase()} ${path} reaches a handler (${res.status})`);
    }
  }
}

export type ResponseCheck = (method: string, pattern: string, r: Recorded) => string | undefined;

/**
 * Checks recorded responses against the document: undefined when `r` is as documented, else why
 * not. `valid(t, …)` asserts it.
 */
export function responseChecker(doc: Doc): ResponseCheck {
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  ajv.addSchema({ ...doc, $id: DOC_ID });
  const cache = new Map<string, ValidateFunction>();
  return (method, pattern, r) => {
    const path = pattern.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
    const op = doc.paths[path]?.[method.toLowerCase()];
    if (!op) return `${method} ${path} is not in the document`;
    const status = String(r.status);
    const response = op.responses[status];
    if (!response) return `status ${status} is not documented (${Object.keys(op.responses).join(', ')})`;
    const types = Object.keys(response.content ?? {});
    if (types.length === 0) return r.body === undefined || r.body === '' ? undefined : 'a body where the document says none';
    const type = types.find((ct) => r.contentType.startsWith(ct));
    if (!type) return `content type ${r.contentType} is not documented (${types.join(', ')})`;
    const pointer = ['paths', path, method.toLowerCase(), 'responses', status, 'content', type, 'schema']
      .map((s) => encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1')))
      .join('/');
    const key = `${DOC_ID}#/${pointer}`;
    let validate = cache.get(key);
    if (!validate) {
      validate = ajv.compile({ $ref: key });
      cache.set(key, validate);
    }
    return validate(r.body) ? undefined : `the body does not match: ${ajv.errorsText(validate.errors, { separator: '; ' })}`;
  };
}

/** Asserts recorded responses match the document. */
export function responseValidator(doc: Doc): (t: Test, method: string, pattern: string, r: Recorded, what?: string) => void {
  const check = responseChecker(doc);
  return (t, method, pattern, r, what = `${method} ${pattern} ${r.status}`) => {
    const why = check(method, pattern, r);
    t.ok(why === undefined, `${what}: as documented${why ? `: ${why}` : ''}`);
  };
}

/**
 * Asserts a request body the service accepted (a 2xx) is one the document's request schema
 * accepts too: the documented body is not stricter than the service.
 */
export function requestValidator(doc: Doc): (t: Test, method: string, pattern: string, body: unknown) => void {
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  ajv.addSchema({ ...doc, $id: DOC_ID });
  return (t, method, pattern, body) => {
    const path = pattern.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
    const op = doc.paths[path]?.[method.toLowerCase()] as { requestBody?: { content: Record<string, unknown> } } | undefined;
    if (!op?.requestBody) {
      t.fail(`${method} ${path} documents no request body`);
      return;
    }
    if (!('application/json' in op.requestBody.content)) return;
    const validate = ajv.compile({
      $ref: `${DOC_ID}#/${['paths', path, method.toLowerCase(), 'requestBody', 'content', 'application/json', 'schema']
        .map((x) => encodeURIComponent(x.replace(/~/g, '~0').replace(/\//g, '~1')))
        .join('/')}`,
    });
    const ok = validate(body);
    t.ok(
      ok,
      `${method} ${pattern}: the accepted request body matches the documented one${ok ? '' : `: ${ajv.errorsText(validate.errors)}`}`,
    );
  };
}

/** One request, recorded (JSON bodies parsed). */
export async function record(
  base: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: unknown } = {},
): Promise<Recorded> {
  const headers: Record<string, string> = { ...opts.headers };
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body, redirect: 'manual' });
  const contentType = res.headers.get('content-type') ?? '';
  const text = await res.text();
  let parsed: unknown = text === '' ? undefined : text;
  if (/json/.test(contentType) && text !== '') parsed = JSON.parse(text);
  return { status: res.status, contentType, body: parsed };
}
