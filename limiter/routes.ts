/**
 * The route table: which upstream a path goes to, and the route's options: whether it needs
 * credentials, its class (which decides the fail mode when a quota does not set one), the
 * ownership rule and the body limit.
 *
 * Matching is by longest path prefix on a segment boundary, over the canonical path
 * (limiter/request-target.ts): `/orders` matches `/orders` and `/orders/7`, never `/ordersx`. A
 * path that matches no route gets 404 `no_route` before any admission work.
 *
 * Ownership is a property of the table, not of one entry: every `owner` prefix any route declares
 * is checked against every request, whichever route matched it, so a longer route added under
 * `/api/v1/users` cannot escape the rule. A configured route that repeats a default route's prefix
 * overrides only the options it names; the others (the ownership rule above all) are inherited,
 * and `owner=off` is the explicit way to drop one.
 */
import { PlatformError } from '../shared/errors.js';
import { bytes } from '../shared/config.js';
import { canonicalPath } from './request-target.js';

/** Route classes and their default fail mode: see `defaultFailMode` in gate.ts. */
export type RouteClass = 'default' | 'public_read' | 'auth' | 'payment' | 'sms' | 'webhook';
export type RouteAuth = 'required' | 'optional';

export interface RouteOptions {
  /**
   * `required`: the caller presents an API key or a bearer token the sidecar verifies (else 401).
   * `optional`: callers without them are admitted under a coarse per-IP cap, and an Authorization
   * header of another scheme (Basic client credentials, say) is the upstream's business and is
   * forwarded untouched; a Bearer token there is still verified.
   */
  auth: RouteAuth;
  class: RouteClass;
  /**
   * Paths under `<owner>/{id}/…` (and `<owner>/{id}` itself) belong to user `{id}`: only that user
   * or a service role may call them. Undefined: no rule declared by this route.
   */
  owner: string | undefined;
  /** Largest request body on this route, bytes; undefined: LIMITER_MAX_BODY. */
  maxBody: number | undefined;
  /**
   * This route's own per-IP cap for callers without credentials (a token bucket per address and
   * route: `rate` per second, `burst` capacity), instead of the shared LIMITER_IP_RATE/BURST one.
   * Sized for a provider's bursts on its webhook route. Undefined: the shared cap.
   */
  ipLimit: { rate: number; burst: number } | undefined;
}

export interface RouteSpec extends Partial<RouteOptions> {
  prefix: string;
  upstream: string;
}

export interface Route extends RouteOptions {
  prefix: string;
  upstream: string;
  /** Index into the upstream pool list. */
  upstreamIndex: number;
}

const CLASSES: readonly RouteClass[] = ['default', 'public_read', 'auth', 'payment', 'sms', 'webhook'];

/**
 * The ownership rule of the default table: the notifier's `/api/v1/users/{user_id}/…` (README,
 * "Route table").
 */
export const USERS_OWNER = '/api/v1/users';

/** The notifier's segment API, whose member uploads are streamed bodies of tens of megabytes. */
export const SEGMENTS_PREFIX = '/api/v1/admin/segments';

/**
 * The body limit of {@link SEGMENTS_PREFIX}: the notifier's own default cap on an upload
 * (NOTIFIER_SEGMENT_MAX_BYTES); a million ids are about 40 MB. Bodies that large are streamed
 * upstream, never buffered (LIMITER_BUFFER_BODY).
 */
export const SEGMENTS_MAX_BODY = 128 * 1024 * 1024;

/**
 * The notifier's provider webhooks (SES events through SNS, Twilio status callbacks): no
 * credentials (a provider proves itself by its signature), class `webhook` (fails open: a lost
 * callback is not replayed by Twilio), and a per-IP cap of its own sized for a provider's bursts,
 * which arrive from a few addresses: 500 per second, bursts of 5 000.
 */
export const WEBHOOKS_PREFIX = '/api/v1/webhooks';
export const WEBHOOKS_IP_LIMIT = { rate: 500, burst: 5_000 };

/**
 * The default table (README, "Route table"): `/api/v1` to the notifier, identity's paths to identity.
 * Signup, login, token, revoke, authorize, device and well-known take no credentials (per-IP cap;
 * a client authenticates to identity itself, with Basic credentials the sidecar forwards);
 * `/userinfo`, orders and checkout need them. The segment API alone gets a large body limit.
 */
export function defaultRoutes(notifierUrl: string, identityUrl: string): RouteSpec[] {
  return [
    { prefix: '/api/v1', upstream: notifierUrl, auth: 'required', class: 'default', owner: USERS_OWNER },
    { prefix: '/api/v1/track', upstream: notifierUrl, auth: 'optional', class: 'public_read' },
    { prefix: WEBHOOKS_PREFIX, upstream: notifierUrl, auth: 'optional', class: 'webhook', ipLimit: WEBHOOKS_IP_LIMIT },
    { prefix: SEGMENTS_PREFIX, upstream: notifierUrl, auth: 'required', class: 'default', maxBody: SEGMENTS_MAX_BODY },
    { prefix: '/auth', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/authorize', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/token', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/revoke', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/device', upstream: identityUrl, auth: 'optional', class: 'auth' },
    { prefix: '/.well-known', upstream: identityUrl, auth: 'optional', class: 'public_read' },
    { prefix: '/userinfo', upstream: identityUrl, auth: 'required', class: 'auth' },
    { prefix: '/orders', upstream: identityUrl, auth: 'required', class: 'default' },
    { prefix: '/order', upstream: identityUrl, auth: 'required', class: 'default' },
    { prefix: '/checkout', upstream: identityUrl, auth: 'required', class: 'payment' },
  ];
}

const OPTION_HELP = `auth=required|optional, class=${CLASSES.join('|')}, owner=/prefix|off, body=<size>, ip=<rate>/<burst>`;

/**
 * Parses `LIMITER_ROUTES`: comma-separated `prefix=url` entries, each optionally followed by
 * `;name=value` options: `auth`, `class`, `owner` (`off` drops an inherited rule) and `body` (a
 * size such as `50mb`). Example: `/v1=http://127.0.0.1:3000;class=public_read;body=1mb`.
 * Options not named are left undefined, to be inherited or defaulted by the table.
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
    const spec: RouteSpec = { prefix, upstream: u.origin };
    for (const o of opts) {
      const at = o.indexOf('=');
      const k = (at < 0 ? o : o.slice(0, at)).trim();
      const v = at < 0 ? '' : o.slice(at + 1).trim();
      if (k === 'auth' && (v === 'required' || v === 'optional')) spec.auth = v;
      else if (k === 'class' && (CLASSES as readonly string[]).includes(v)) spec.class = v as RouteClass;
      else if (k === 'owner' && v === 'off') spec.owner = 'off';
      else if (k === 'owner' && v.startsWith('/')) {
        spec.owner = normalizePrefix(v);
        if (!underPrefix(spec.owner, prefix)) throw new Error(`route "${prefix}": owner ${spec.owner} must lie under the route's prefix`);
      } else if (k === 'ip') {
        const m = /^(\d{1,7})\/(\d{1,7})$/.exec(v);
        if (!m || Number(m[1]) < 1 || Number(m[2]) < Number(m[1]) / 1000 || Number(m[2]) < 1) {
          throw new Error(`route "${prefix}": ip "${v}" must be <rate per second>/<burst>, both at least 1 (e.g. 500/5000)`);
        }
        spec.ipLimit = { rate: Number(m[1]), burst: Number(m[2]) };
      } else if (k === 'body') {
        try {
          spec.maxBody = bytes(v);
        } catch {
          throw new Error(`route "${prefix}": body "${v}" is not a size (e.g. 512kb, 50mb)`);
        }
      } else throw new Error(`route "${prefix}": unknown option "${o}" (${OPTION_HELP})`);
    }
    out.push(spec);
  }
  return out;
}

/**
 * A configured prefix in the canonical form requests are matched in (request-target.ts), without
 * a trailing `/`: a prefix that could never equal a canonical path would be a dead route.
 */
function normalizePrefix(p: string): string {
  const raw = p.trim();
  if (!raw.startsWith('/')) throw new Error(`route prefix "${raw}" must start with /`);
  const c = canonicalPath(raw);
  if (typeof c !== 'string') throw new Error(`route prefix "${raw}": ${c.detail}`);
  let s = c;
  while (s.length > 1 && s.endsWith('/')) s = s.slice(0, -1);
  return s;
}

/** True when `path` is `prefix` or lies under it on a segment boundary. */
function underPrefix(path: string, prefix: string): boolean {
  if (prefix === '/') return true;
  if (!path.startsWith(prefix)) return false;
  const next = path.charCodeAt(prefix.length);
  return Number.isNaN(next) || next === 47;
}

const NONE: string[] = [];

/** `{id}` when `path` is `<owner>/{id}` or lies below it, percent-decoded; else undefined. */
function idUnder(path: string, owner: string): string | undefined {
  const base = owner === '/' ? 0 : owner.length;
  if (base > 0 && (!path.startsWith(owner) || path.charCodeAt(base) !== 47)) return undefined;
  if (path.length <= base + 1) return undefined;
  const end = path.indexOf('/', base + 1);
  const raw = path.slice(base + 1, end < 0 ? undefined : end);
  if (raw === '') return undefined;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** Longest-prefix matcher over a fixed table. Built once at start. */
export class RouteTable {
  readonly routes: readonly Route[];
  readonly upstreams: readonly string[];
  /** Every ownership prefix declared by any route, applied to every request. */
  readonly owners: readonly string[];
  private readonly byLength: Route[];

  /**
   * Later specs override earlier ones with the same prefix (configured routes override defaults),
   * option by option: what a later spec leaves undefined is kept from the earlier one.
   */
  constructor(specs: RouteSpec[]) {
    const byPrefix = new Map<string, RouteSpec>();
    for (const s of specs) {
      const prefix = normalizePrefix(s.prefix);
      const before = byPrefix.get(prefix);
      byPrefix.set(prefix, {
        prefix,
        upstream: s.upstream,
        auth: s.auth ?? before?.auth,
        class: s.class ?? before?.class,
        owner: s.owner ?? before?.owner,
        maxBody: s.maxBody ?? before?.maxBody,
        ipLimit: s.ipLimit ?? before?.ipLimit,
      });
    }
    const upstreams: string[] = [];
    const routes: Route[] = [];
    const owners = new Set<string>();
    for (const s of byPrefix.values()) {
      let i = upstreams.indexOf(s.upstream);
      if (i < 0) i = upstreams.push(s.upstream) - 1;
      const owner = s.owner === 'off' ? undefined : s.owner;
      if (owner !== undefined) owners.add(owner);
      routes.push({
        prefix: s.prefix,
        upstream: s.upstream,
        upstreamIndex: i,
        auth: s.auth ?? 'required',
        class: s.class ?? 'default',
        owner,
        maxBody: s.maxBody,
        ipLimit: s.ipLimit,
      });
    }
    this.routes = routes;
    this.upstreams = upstreams;
    this.owners = [...owners].sort((a, b) => b.length - a.length);
    this.byLength = [...routes].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** The route for a canonical path (without query), or undefined. */
  match(path: string): Route | undefined {
    const list = this.byLength;
    for (let i = 0; i < list.length; i++) {
      const r = list[i]!;
      if (underPrefix(path, r.prefix)) return r;
    }
    return undefined;
  }

  /**
   * The users a canonical path belongs to under the ownership rules: for every rule `<owner>` it
   * lies under as `<owner>/{id}[/…]`, that `{id}`, percent-decoded as the upstream's router decodes
   * a path parameter. Usually none or one; nested rules each name theirs, and the caller must be
   * every one of them.
   */
  ownersOf(path: string): string[] {
    let out: string[] | undefined;
    for (const o of this.owners) {
      const id = idUnder(path, o);
      if (id !== undefined) (out ??= []).push(id);
    }
    return out ?? NONE;
  }

  /** The user of the longest ownership rule covering `path`, or undefined. */
  ownerOf(path: string): string | undefined {
    // `owners` is sorted longest first.
    return this.ownersOf(path)[0];
  }

  /** Like `match`, but a missing route is a typed error. */
  require(path: string): Route {
    const r = this.match(path);
    if (!r) throw new PlatformError('no_route', { detail: `no upstream is configured for ${path}` });
    return r;
  }
}
