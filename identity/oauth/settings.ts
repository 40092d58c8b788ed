/**
 * The authorization server's configuration: the variables it reads (identity/env.ts, section
 * "identity: oauth", plus the token variables it shares with the verifiers) and the settings the
 * endpoints use, derived once.
 */
import { pick, type ConfigOf } from '../../shared/config.js';
import { SHARED_ENV } from '../../shared/env.js';
import { IDENTITY_ENV } from '../env.js';
import type { ThrottleLimits } from '../accounts/login-throttle.js';
import type { RotationPolicy, SigningAlg } from '../keys/key-schedule.js';

// What this process may read: its own variables and the shared ones.
const ENV = { ...SHARED_ENV, ...IDENTITY_ENV };

/** Add these to identity/config.ts's `pick` list. */
export const OAUTH_CONFIG_VARS = [
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'JWT_CLOCK_SKEW',
  'IDENTITY_ACCESS_TOKEN_TTL',
  'IDENTITY_ID_TOKEN_TTL',
  'IDENTITY_REFRESH_TOKEN_TTL',
  'IDENTITY_REFRESH_GRACE',
  'IDENTITY_AUTH_CODE_TTL',
  'IDENTITY_DEVICE_CODE_TTL',
  'IDENTITY_DEVICE_POLL_INTERVAL',
  'IDENTITY_SIGNING_ALG',
  'IDENTITY_KEY_ROTATION_INTERVAL',
  'IDENTITY_JWKS_MAX_AGE',
  'IDENTITY_ADMIN_TOKEN',
  // The sign-in and device pages share /auth/login's throttle (identity/accounts/login-throttle.ts).
  'IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT',
  'IDENTITY_LOGIN_MAX_FAILURES_PER_IP',
  'IDENTITY_LOGIN_FAILURE_WINDOW',
  'SERVICE_SECRET',
] as const;

export const oauthConfig = pick(ENV, OAUTH_CONFIG_VARS);
export type OAuthConfig = ConfigOf<typeof oauthConfig>;

/**
 * Lifetime of the access tokens `/auth/login` issues (`expires_in` 3600; README, "Accounts: signup
 * and login").
 */
export const LOGIN_TOKEN_TTL_MS = 3_600_000;

export interface OAuthSettings {
  /** The issuer URL, without a trailing slash; every endpoint is advertised under it. */
  readonly issuer: string;
  readonly audience: string;
  readonly clockSkewSec: number;
  readonly accessTokenTtlMs: number;
  readonly idTokenTtlMs: number;
  readonly refreshTokenTtlMs: number;
  readonly refreshGraceMs: number;
  readonly authCodeTtlMs: number;
  readonly deviceCodeTtlMs: number;
  readonly devicePollIntervalMs: number;
  readonly signingAlg: SigningAlg;
  readonly keyRotationIntervalMs: number;
  readonly jwksMaxAgeMs: number;
  readonly adminToken: string | undefined;
  /** The sign-in throttle's limits, the same as /auth/login's (one set of counters). */
  readonly loginThrottle: ThrottleLimits;
  /** SERVICE_SECRET: with it, the sidecar's X-Subject-Address names the client address (shared/sidecar-trust.ts). */
  readonly serviceSecret: string | undefined;
}

export function oauthSettings(c: OAuthConfig): OAuthSettings {
  return Object.freeze({
    issuer: c.JWT_ISSUER.replace(/\/+$/, ''),
    audience: c.JWT_AUDIENCE,
    clockSkewSec: Math.round(c.JWT_CLOCK_SKEW / 1000),
    accessTokenTtlMs: c.IDENTITY_ACCESS_TOKEN_TTL,
    idTokenTtlMs: c.IDENTITY_ID_TOKEN_TTL,
    refreshTokenTtlMs: c.IDENTITY_REFRESH_TOKEN_TTL,
    refreshGraceMs: c.IDENTITY_REFRESH_GRACE,
    authCodeTtlMs: c.IDENTITY_AUTH_CODE_TTL,
    deviceCodeTtlMs: c.IDENTITY_DEVICE_CODE_TTL,
    devicePollIntervalMs: c.IDENTITY_DEVICE_POLL_INTERVAL,
    signingAlg: c.IDENTITY_SIGNING_ALG,
    keyRotationIntervalMs: c.IDENTITY_KEY_ROTATION_INTERVAL,
    jwksMaxAgeMs: c.IDENTITY_JWKS_MAX_AGE,
    adminToken: c.IDENTITY_ADMIN_TOKEN,
    loginThrottle: Object.freeze({
      perAccount: c.IDENTITY_LOGIN_MAX_FAILURES_PER_ACCOUNT,
      perIp: c.IDENTITY_LOGIN_MAX_FAILURES_PER_IP,
      windowMs: c.IDENTITY_LOGIN_FAILURE_WINDOW,
    }),
    serviceSecret: c.SERVICE_SECRET,
  });
}

/**
 * The key schedule these settings imply: a key retires once the longest-lived token it can have
 * signed (access, id, or a 1 h login token) has expired, plus the verifiers' clock skew.
 */
export function rotationPolicy(s: OAuthSettings): RotationPolicy {
  return {
    alg: s.signingAlg,
    rotationIntervalMs: s.keyRotationIntervalMs,
    jwksMaxAgeMs: s.jwksMaxAgeMs,
    retireAfterMs: Math.max(s.accessTokenTtlMs, s.idTokenTtlMs, LOGIN_TOKEN_TTL_MS) + s.clockSkewSec * 1000,
  };
}
