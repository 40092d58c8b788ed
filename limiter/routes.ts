/**
 * The route table: which upstream a path goes to, whether it needs credentials, and its class
 * (which decides the fail mode when a quota does not set one).
 *
 * Matching is by longest path prefix on a segment boundary: `/orders` matches `/orders`,
 * `/orders/7` and `/orders?x=1`, never `/ordersx`. A path that matches no route gets 404
 * `no_route` before any admission work.
 */
import { PlatformError } from '../shared/errors.js';

/** Route classes and their default fail mode: see `defaultFailMode`. */
export type RouteClass = 'default' | 'public_read' | 'auth' | 'payment' | 'sms';
export type RouteAuth = 'required' | 'optional';

export interface RouteSpec {
  prefix: string;
  upstream: string;
  /** `optional`: callers without credentials are admitted under a coarse per-IP cap. */
  auth: RouteAuth;
  class: RouteClass;
  /** Paths under `/api/v1/users/{user_id}/` must be that user's (or a service role's). */
  ownerCheck?: boolean;
}

export interface Route extends RouteSpec {
  /** Index into the upstream pool list. */
  upstreamIndex: number;
}

const CLASSES: readonly RouteClass[] = ['default', 'public_read', 'auth', 'payment', 'sms'];

/**
 * The default table of DESIGN.md: `/api/v1` to the notifier, identity's paths to identity. Signup,
 * login, token, authorize, device and well-known take no credentials (per-IP cap); `/userinfo`,
 * orders and checkout need them.
 */
export function defaultRoutes(notifierUrl: string, identityUrl: string): RouteSpec[] {
  return [
    { prefix: '/api/v1', upstream: notifierUrl, auth: 'required', class: 'default', ownerCheck: true },
    { prefix: '/api/v1/track', upstream: notifierUrl, auth: 'optional', class: 'public_read' },
    { prefix: '/auth', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/authorize', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/token', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/device', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/.well-known', upstream: identityUrl, auth: 'optional', class: 'public_read' },
    { prefix: '/userinfo', upstream: identityUrl, auth: 'required', class: 'auth' },
    { prefix: '/orders', upstream: identityUrl, auth: 'required', class: 'default' },
    { prefix: '/order', upstream: identityUrl, auth: 'required', class: 'default' },
    { prefix: '/checkout', upstream: identityUrl, auth: 'required', class: 'payment' },
  ];
}

/**
 * Parses `LIMITER_ROUTES`: comma-separated `prefix=url` entries, each optionally followed by
 * `;auth=optional` and/or `;class=<class>`. Example: `/v1=http://127.0.0.1:3000;class=public_read`.
 */
export function parseRoutes(raw: string): RouteSpec[] {
  const out: RouteSpec[] = [];
  for (const entry of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [head, ...opts] = entry.split(';');
    const eq = head!.indexOf('=');
    if (eq <= 0) throw new Error(`route "${entry}" must look like /prefix=http://host:port`);
    const prefix = normalizePrefix(head!.slice(0, eq));
    const upstream = head!.slice(eq + 1).trim();
    let u: URL;
    try {
      u = new URL(upstream);
    } catch {
      throw new Error(`route "${prefix}": upstream "${upstream}" is not a URL`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`route "${prefix}": upstream must be http or https`);
    if (u.pathname !== '/' && u.pathname !== '') throw new Error(`route "${prefix}": upstream must be an origin without a path`);
    const spec: RouteSpec = { prefix, upstream: u.origin, auth: 'required', class: 'default' };
    for (const o of opts) {
      const [k, v] = o.split('=').map((s) => s.trim());
      if (k === 'auth' && (v === 'required' || v === 'optional')) spec.auth = v;
      else if (k === 'class' && (CLASSES as readonly string[]).includes(v ?? '')) spec.class = v as RouteClass;
      else throw new Error(`route "${prefix}": unknown option "${o}" (auth=required|optional, class=${CLASSES.join('|')})`);
    }
    out.push(spec);
  }
  return out;
}

function normalizePrefix(p: string): string {
  let s = p.trim();
  if (!s.startsWith('/')) throw new Error(`route prefix "${s}" must start with /`);
  while (s.length > 1 && s.endsWith('/')) s = s.slice(0, -1);
  return s;
}

/** Longest-prefix matcher over a fixed table. Built once at start. */
export class RouteTable {
  readonly routes: readonly Route[];
  readonly upstreams: readonly string[];
  private readonly byLength: Route[];

  /** Later specs override earlier ones with the same prefix (configured routes override defaults). */
  constructor(specs: RouteSpec[]) {
    const byPrefix = new Map<string, RouteSpec>();
    for (const s of specs) byPrefix.set(normalizePrefix(s.prefix), { ...s, prefix: normalizePrefix(s.prefix) });
    const upstreams: string[] = [];
    const routes: Route[] = [];
    for (const s of byPrefix.values()) {
      let i = upstreams.indexOf(s.upstream);
      if (i < 0) i = upstreams.push(s.upstream) - 1;
      routes.push({ ...s, upstreamIndex: i });
    }
    this.routes = routes;
    this.upstreams = upstreams;
    this.byLength = [...routes].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** The route for a path (without query), or undefined. */
  match(path: string): Route | undefined {
    const list = this.byLength;
    for (let i = 0; i < list.length; i++) {
      const r = list[i]!;
      const p = r.prefix;
      if (p === '/') return r;
      if (path.startsWith(p)) {
        const next = path.charCodeAt(p.length);
        // NaN (end of string), '/' or '?' keep the match on a segment boundary.
        if (Number.isNaN(next) || next === 47 || next === 63) return r;
      }
    }
    return undefined;
  }

  /** Like `match`, but a missing route is a typed error. */
  require(path: string): Route {
    const r = this.match(path);
    if (!r) throw new PlatformError('no_route', { detail: `no upstream is configured for ${path}` });
    return r;
  }
}
