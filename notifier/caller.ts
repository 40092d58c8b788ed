/**
 * Who is calling the notifier (README, "Who may call").
 *
 * Requests normally arrive through the sidecar, which strips any inbound `X-Subject*` headers and
 * sets `X-Subject` (`user:<id>`, `tenant:<id>`, `key:<sha256 hex>`), `X-Subject-Role` and
 * `X-Subject-Secret` (= SERVICE_SECRET). Those headers are trusted only when the secret matches,
 * compared in constant time (shared/sidecar-trust.ts); with SERVICE_SECRET unset they are never trusted. Otherwise (or
 * besides: a `tenant:` subject names no user) a bearer access token is verified here with the
 * shared verifier (shared/jwt), built on first use so a notifier reached only through the sidecar
 * never fetches keys.
 *
 * Authorization helpers: routes under `/api/v1/users/{user_id}/...` need that user or a service
 * role ({@link requireUserOrService}); operator routes need one of a set of roles
 * ({@link requireRole}).
 */
import { PlatformError } from '../shared/errors.js';
import { isTokenError, quotaSubjectOf, type Verifier } from '../shared/jwt/index.js';
import { sidecarTrust } from '../shared/sidecar-trust.js';

export interface Caller {
  /** The subject: `user:<id>`, `tenant:<id>`, `key:<sha256 hex>`. */
  readonly subject: string;
  /** The role the sidecar vouched for or the token carries (`service` for API keys). */
  readonly role: string;
  /** The user this caller is, when known: a `user:` subject, or a verified token's `sub`. */
  readonly userId?: string;
  /** How the identity was established. */
  readonly via: 'sidecar' | 'token';
}

export interface CallerOptions {
  /** SERVICE_SECRET. Unset: X-Subject headers are never trusted. */
  serviceSecret: string | undefined;
  /** Builds the access-token verifier on first use. Unset: bearer tokens are refused. */
  verifier?: () => Verifier;
  /** Roles that may act for any user. Default `service`, `admin` (as the sidecar's LIMITER_SERVICE_ROLES). */
  serviceRoles?: readonly string[];
}

export interface CallerResolver {
  /** The caller of a request. @throws PlatformError credentials_required | invalid_token | token_expired | dependency_unavailable */
  callerOf(ctx: { readonly headers: Readonly<Record<string, string>> }): Promise<Caller>;
  /** Roles that may act for any user. */
  readonly serviceRoles: readonly string[];
  /** Stops the verifier (aborts a key fetch in flight). */
  close(): void;
}

export const DEFAULT_SERVICE_ROLES: readonly string[] = Object.freeze(['service', 'admin']);

const CHALLENGE = { 'www-authenticate': 'Bearer realm="notifier"' };
const INVALID = { 'www-authenticate': 'Bearer realm="notifier", error="invalid_token"' };
const BEARER_RE = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;
/** Behind the sidecar, which verified the proof: Bearer or DPoP. */
const VOUCHED_RE = /^(?:Bearer|DPoP)[ \t]+([^\s]+)[ \t]*$/i;

export function createCallerResolver(opts: CallerOptions): CallerResolver {
  const sidecar = sidecarTrust(opts.serviceSecret);
  const serviceRoles = opts.serviceRoles ?? DEFAULT_SERVICE_ROLES;
  let verifier: Verifier | undefined;

  /**
   * The caller a token names. `vouched`: the sidecar, trusted by the shared secret, has already
   * verified this request's credentials, including a DPoP proof and the token's binding to it
   * (README, "Who is calling"); the token is read here only for its `sub`, so a DPoP-bound token
   * under the DPoP scheme is accepted as it stands. Otherwise only Bearer, and shared/jwt refuses
   * a DPoP-bound token sent that way.
   */
  async function fromToken(authorization: string, vouched = false): Promise<{ subject: string; role: string; userId: string }> {
    const m = (vouched ? VOUCHED_RE : BEARER_RE).exec(authorization);
    if (!m)
      throw new PlatformError('invalid_token', { detail: 'the Authorization header must be Bearer <access token>', headers: INVALID });
    if (!opts.verifier) throw new PlatformError('invalid_token', { detail: 'bearer tokens are not accepted here', headers: INVALID });
    verifier ??= opts.verifier();
    const claims = await verifier.verifyAccessToken(m[1]!, vouched ? 'any' : undefined).catch((err: unknown) => {
      if (isTokenError(err)) throw err;
      throw new PlatformError('invalid_token', { detail: 'the access token could not be verified', headers: INVALID, cause: err });
    });
    return { subject: quotaSubjectOf(claims), role: claims.role, userId: claims.sub };
  }

  return {
    serviceRoles,
    async callerOf(ctx) {
      const h = ctx.headers;
      const authorization = h['authorization'];
      const subject = h['x-subject'];
      if (subject && sidecar.vouched(h)) {
        const role = h['x-subject-role'] || 'anonymous';
        if (subject.startsWith('user:')) return { subject, role, userId: subject.slice(5), via: 'sidecar' };
        // A tenant-scoped token names a tenant as its subject; the user, when needed, is its `sub`.
        if (subject.startsWith('tenant:') && authorization && opts.verifier) {
          const t = await fromToken(authorization, true);
          return { subject, role, userId: t.userId, via: 'sidecar' };
        }
        return { subject, role, via: 'sidecar' };
      }
      if (!authorization || authorization.trim() === '') {
        throw new PlatformError('credentials_required', { detail: 'send Authorization: Bearer <access token>', headers: CHALLENGE });
      }
      const t = await fromToken(authorization);
      return { ...t, via: 'token' };
    },
    close() {
      verifier?.close();
    },
  };
}

/** True when the caller holds one of the roles that act for any user. */
export function isServiceCaller(caller: Caller, serviceRoles: readonly string[] = DEFAULT_SERVICE_ROLES): boolean {
  return serviceRoles.includes(caller.role);
}

/** Routes under `/api/v1/users/{user_id}/...`: that user or a service role. @throws PlatformError forbidden */
export function requireUserOrService(caller: Caller, userId: string, serviceRoles: readonly string[] = DEFAULT_SERVICE_ROLES): void {
  if (isServiceCaller(caller, serviceRoles)) return;
  if (caller.userId !== undefined && caller.userId === userId) return;
  throw new PlatformError('forbidden', { detail: 'this resource belongs to another user' });
}

/** Operator routes: the caller must hold one of `roles`. @throws PlatformError forbidden */
export function requireRole(caller: Caller, roles: readonly string[]): void {
  if (!roles.includes(caller.role)) throw new PlatformError('forbidden', { detail: `needs role ${roles.join(' or ')}` });
}
