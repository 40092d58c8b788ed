/**
 * DPoP at identity (RFC 9449): the proofs of token requests (`/token`) and of DPoP-bound tokens
 * on identity's own resource endpoints (`/userinfo`), over shared/dpop with the Postgres replay
 * store (identity/tokens/dpop-store.ts), so a proof is used once across every replica.
 *
 * Nonces (IDENTITY_DPOP_NONCE): `required` (the default) makes both endpoints accept a proof only
 * with a nonce of ours from the current or previous 5-minute window; a proof without one is
 * answered `use_dpop_nonce` with the nonce in `DPoP-Nonce`, and every DPoP answer carries the
 * current nonce, so a client that keeps the last one it saw needs the extra round trip once.
 * `off`: no nonces; the `iat` window and the single-use `jti` are the only freshness checks.
 * The nonce secret is one row in Postgres, shared by the replicas.
 */
import { pick, type ConfigOf } from '../../shared/config.js';
import type { Clock } from '../../shared/clock.js';
import type { Pool } from '../../shared/db.js';
import {
  createDpopVerifier,
  createNonceSource,
  expectedHtu,
  isDpopError,
  singleDpopHeader,
  type CheckedProof,
  type DpopError,
  type DpopNonces,
} from '../../shared/dpop/index.js';
import { SHARED_ENV } from '../../shared/env.js';
import { IDENTITY_ENV } from '../env.js';
import type { RequestContext } from '../../shared/http.js';
import { PgReplayStore, nonceSecret } from '../tokens/dpop-store.js';
import { OAuthError } from './oauth-error.js';

// What this process may read: its own variables and the shared ones.
const ENV = { ...SHARED_ENV, ...IDENTITY_ENV };

/** Add these to identity/config.ts's `pick` list. */
export const DPOP_CONFIG_VARS = ['IDENTITY_DPOP_NONCE', 'DPOP_IAT_WINDOW'] as const;
export const dpopConfig = pick(ENV, DPOP_CONFIG_VARS);

export interface DpopSettings {
  readonly nonce: 'required' | 'off';
  /** A proof's `iat` may be this far from now, either way. */
  readonly iatWindowSec: number;
}

export const DPOP_SETTINGS_DEFAULT: DpopSettings = Object.freeze({ nonce: 'required', iatWindowSec: 60 });

export function dpopSettings(c: ConfigOf<typeof dpopConfig>): DpopSettings {
  return Object.freeze({ nonce: c.IDENTITY_DPOP_NONCE, iatWindowSec: Math.round(c.DPOP_IAT_WINDOW / 1000) });
}

/** The nonces live 5 minutes (a nonce is accepted in its window and the next). */
export const NONCE_WINDOW_MS = 5 * 60_000;

export interface IdentityDpop {
  readonly settings: DpopSettings;
  /**
   * The checked proof of a token request, or undefined when it has no DPoP header. Throws
   * `OAuthError` (`invalid_dpop_proof`, `use_dpop_nonce` with a `DPoP-Nonce` header).
   */
  tokenRequestProof(ctx: RequestContext, path: string): Promise<CheckedProof | undefined>;
  /** The checked proof for `accessToken` on a resource request. Throws `DpopError` (a 401 problem). */
  resourceProof(ctx: RequestContext, path: string, accessToken: string): Promise<CheckedProof>;
  /** Headers for an answer to a DPoP request: the current nonce when nonces are on. */
  answerHeaders(): Promise<Record<string, string>>;
}

export function createIdentityDpop(pool: Pool, issuer: string, settings: DpopSettings, clock: Clock): IdentityDpop {
  const verifier = createDpopVerifier({ clock, replay: new PgReplayStore(pool, clock), iatWindowSec: settings.iatWindowSec });
  let nonces: Promise<DpopNonces> | undefined;
  const nonceSource = (): Promise<DpopNonces> => {
    nonces ??= nonceSecret(pool, clock.now()).then(
      (secret) => createNonceSource(secret, clock, NONCE_WINDOW_MS),
      (err: unknown) => {
        nonces = undefined; // the next request tries again
        throw err;
      },
    );
    return nonces;
  };
  const required = settings.nonce === 'required';

  async function withNonce(err: DpopError): Promise<DpopError> {
    if (err.rfcError === 'use_dpop_nonce' && err.headers) err.headers['dpop-nonce'] = (await nonceSource()).current();
    return err;
  }

  async function check(ctx: RequestContext, path: string, accessToken: string | undefined): Promise<CheckedProof> {
    const proof = singleDpopHeader(ctx.headers['dpop']);
    const n = required ? await nonceSource() : undefined;
    return verifier.verify(proof, {
      method: ctx.method.toUpperCase(),
      htu: expectedHtu(issuer, path),
      accessToken,
      nonce: n && ((v) => n.isValid(v)),
    });
  }

  return {
    settings,
    async tokenRequestProof(ctx, path) {
      if (ctx.headers['dpop'] === undefined) return undefined;
      try {
        return await check(ctx, path, undefined);
      } catch (err) {
        if (!isDpopError(err) || err.code === 'dependency_unavailable') throw err;
        const e = new OAuthError(err.rfcError, err.detail ?? 'the DPoP proof is invalid');
        if (err.rfcError === 'use_dpop_nonce') e.headers['dpop-nonce'] = (await nonceSource()).current();
        throw e;
      }
    },
    async resourceProof(ctx, path, accessToken) {
      try {
        return await check(ctx, path, accessToken);
      } catch (err) {
        throw isDpopError(err) ? await withNonce(err) : err;
      }
    },
    async answerHeaders(): Promise<Record<string, string>> {
      if (!required) return {};
      return { 'dpop-nonce': (await nonceSource()).current() };
    },
  };
}
