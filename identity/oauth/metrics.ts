/**
 * The authorization server's Prometheus metrics (on identity's /metrics when a registry is given).
 */
import { Counter, type Registry } from '../../shared/metrics.js';

export interface OAuthMetrics {
  tokensIssued: Counter<'grant_type'>;
  tokenErrors: Counter<'error'>;
  securityAlerts: Counter<'type'>;
  keyRotations: Counter<'action'>;
  tokenRevocations: Counter<'token_type'>;
}

/** The alerts `securityAlerts` counts; their series exist from the start, at 0. */
const SECURITY_ALERTS = ['RefreshTokenReuseDetected', 'AuthorizationCodeReuseDetected'];

export function createOAuthMetrics(registry: Registry | undefined): OAuthMetrics {
  const registers = registry ? [registry] : [];
  const metrics: OAuthMetrics = {
    tokensIssued: new Counter({
      name: 'identity_tokens_issued_total',
      help: 'Token responses issued by /token, by grant type',
      labelNames: ['grant_type'],
      registers,
    }),
    tokenErrors: new Counter({
      name: 'identity_token_errors_total',
      help: 'OAuth error responses of /token, by error code',
      labelNames: ['error'],
      registers,
    }),
    securityAlerts: new Counter({
      name: 'identity_security_alerts_total',
      help: 'Security alerts raised (RefreshTokenReuseDetected, AuthorizationCodeReuseDetected)',
      labelNames: ['type'],
      registers,
    }),
    keyRotations: new Counter({
      name: 'identity_signing_key_changes_total',
      help: 'Signing-key schedule changes applied by this process (created, retire_scheduled, deleted)',
      labelNames: ['action'],
      registers,
    }),
    tokenRevocations: new Counter({
      name: 'identity_token_revocations_total',
      help: 'Tokens revoked at /revoke (RFC 7009), by token type (a refresh token revokes its family)',
      labelNames: ['token_type'],
      registers,
    }),
  };
  // A dashboard shows "no alerts" as 0 instead of no data (Prometheus: initialise the label values
  // known in advance).
  for (const type of SECURITY_ALERTS) metrics.securityAlerts.inc({ type }, 0);
  return metrics;
}
