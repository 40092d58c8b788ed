/**
 * Keeps a replica's key ring in step with the others, so that a key revoked on any replica leaves
 * this one's JWKS (and stops signing here) within seconds: a reload on every NOTIFY on
 * `identity_signing_keys` (a wake-up hint, sent at the commit of a revocation), and a reload every
 * `pollMs` whatever happens (the truth: a lost notification or a dropped LISTEN connection then
 * costs at most one poll). The table is a handful of rows and a reload reuses every imported key,
 * so polling every few seconds is cheap.
 */
import type { Logger } from '../../shared/log.js';
import { PgListener } from '../../shared/pg-listener.js';
import type { KeyRing } from './key-ring.js';
import { KEYS_CHANGED_CHANNEL } from './key-store.js';

/** Default poll period: a revocation a replica missed the NOTIFY of reaches it within this. */
export const KEY_RELOAD_MS = 5_000;

export interface KeyWatchOptions {
  ring: KeyRing;
  /** Without one, no LISTEN: polling alone (tests that run one replica). */
  databaseUrl?: string;
  pollMs?: number;
  log: Logger;
}

export interface KeyWatch {
  close(): Promise<void>;
}

export async function watchSigningKeys(opts: KeyWatchOptions): Promise<KeyWatch> {
  const reload = (why: string): void => {
    opts.ring.reload().catch((err: unknown) => opts.log.warn({ err, why }, 'signing keys: reload failed; keeping the loaded keys'));
  };
  const listener = opts.databaseUrl
    ? new PgListener({
        url: opts.databaseUrl,
        channels: [KEYS_CHANGED_CHANNEL],
        applicationName: 'identity:keys',
        log: opts.log,
        onNotification: (_channel, kid) => {
          opts.log.info({ kid }, 'signing keys: changed on another replica; reloading');
          reload('notify');
        },
        // Whatever was sent while the connection was down is caught up at once.
        onConnect: () => reload('listen-connected'),
      })
    : undefined;
  await listener?.start();
  const timer = setInterval(() => reload('poll'), opts.pollMs ?? KEY_RELOAD_MS);
  timer.unref();
  return {
    async close() {
      clearInterval(timer);
      await listener?.close();
    },
  };
}
