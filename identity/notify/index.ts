/**
 * identity → notifier: the relay (relay.ts) with its client and credentials, built from the
 * identity's configuration. See relay.ts for what it does and the README ("Security alerts").
 */
import type pg from 'pg';
import type { Clock } from '../../shared/clock.js';
import type { Logger } from '../../shared/log.js';
import type { Registry } from '../../shared/metrics.js';
import type { TokenIssuer } from '../tokens/token-issuer.js';
import { NotifierClient, type ServiceAuth } from './notifier-client.js';
import { NotifyRelay } from './relay.js';
import { apiKeyAuth, selfIssuedAuth } from './service-auth.js';

export { NotifyRelay } from './relay.js';
export type { ServiceAuth } from './notifier-client.js';
export { IDENTITY_TEMPLATES, shipTemplates } from './templates.js';

export interface RelayConfig {
  IDENTITY_NOTIFY_URL: string;
  IDENTITY_NOTIFY_API_KEY?: string | undefined;
  IDENTITY_NOTIFY_POLL_INTERVAL: number;
  IDENTITY_NOTIFY_RETRY_MIN: number;
  IDENTITY_NOTIFY_RETRY_MAX: number;
  IDENTITY_NOTIFY_TIMEOUT: number;
}

export function createNotifyRelay(
  config: RelayConfig,
  deps: { pool: pg.Pool; tokens: TokenIssuer; clock: Clock; log: Logger; registry?: Registry; auth?: ServiceAuth | undefined },
): NotifyRelay {
  const auth =
    deps.auth ?? (config.IDENTITY_NOTIFY_API_KEY ? apiKeyAuth(config.IDENTITY_NOTIFY_API_KEY) : selfIssuedAuth(deps.tokens, deps.clock));
  const client = new NotifierClient({
    baseUrl: config.IDENTITY_NOTIFY_URL,
    auth,
    timeoutMs: config.IDENTITY_NOTIFY_TIMEOUT,
    clock: deps.clock,
  });
  return new NotifyRelay({
    pool: deps.pool,
    client,
    log: deps.log,
    clock: deps.clock,
    registry: deps.registry,
    pollIntervalMs: config.IDENTITY_NOTIFY_POLL_INTERVAL,
    backoff: {
      minMs: config.IDENTITY_NOTIFY_RETRY_MIN,
      maxMs: Math.max(config.IDENTITY_NOTIFY_RETRY_MIN, config.IDENTITY_NOTIFY_RETRY_MAX),
    },
  });
}
