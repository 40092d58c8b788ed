/**
 * The variables the console reads (declared in console/env.ts, or shared/env.ts when another process reads them
 * too; all in the README's configuration table), validated once at start by {@link loadConsoleConfig}.
 */
import { ConfigError, loadConfig, pick, type ConfigOf } from '../shared/config.js';
import { SHARED_ENV } from '../shared/env.js';
import { CONSOLE_ENV } from './env.js';

// What this process may read: its own variables and the shared ones.
const ENV = { ...SHARED_ENV, ...CONSOLE_ENV };

export const consoleConfig = pick(ENV, [
  'LOG_LEVEL',
  'HOST',
  'SHUTDOWN_GRACE',
  'MAX_BODY_BYTES',
  'CONSOLE_PORT',
  'CONSOLE_PUBLIC_URL',
  'CONSOLE_CLIENT_ID',
  'CONSOLE_CLIENT_SECRET',
  'CONSOLE_IDENTITY_PUBLIC_URL',
  'CONSOLE_CONTROL_PLANE_URL',
  'CONSOLE_SESSION_IDLE',
  'CONSOLE_SESSION_MAX',
  'CONSOLE_API_TIMEOUT',
  'CONSOLE_SCRAPE_INTERVAL',
  'CONSOLE_SIDECAR_METRICS_URL',
  // the services the console calls, and the issuer its ID tokens must name
  'IDENTITY_URL',
  'NOTIFIER_URL',
  'JWT_ISSUER',
]);

export type ConsoleConfig = ConfigOf<typeof consoleConfig>;

/**
 * Loads and checks the console's configuration. The client secret is optional in the catalogue
 * (only the console needs it) and required here; the public URL must be an origin (no path),
 * since it is compared with the browser's `Origin` header.
 */
export function checkConsoleConfig(c: ConsoleConfig): ConsoleConfig {
  if (c.CONSOLE_CLIENT_SECRET === undefined) throw new ConfigError('CONSOLE_CLIENT_SECRET', 'is required but not set');
  const u = new URL(c.CONSOLE_PUBLIC_URL);
  if (u.pathname !== '/' || u.search !== '' || u.hash !== '')
    throw new ConfigError('CONSOLE_PUBLIC_URL', `must be an origin without a path (e.g. ${u.origin}), got "${c.CONSOLE_PUBLIC_URL}"`);
  return c;
}

export function loadConsoleConfig(env: Record<string, string | undefined> = process.env): ConsoleConfig {
  return checkConsoleConfig(loadConfig(consoleConfig, env));
}
