/**
 * The signing keys in memory: which key signs now, which keys the JWKS lists now. Loaded from the
 * database at first use, after every rotation step or revocation, and whenever key-watch.ts says
 * another replica changed them; the choice itself is made per call from the stored schedule and
 * the injected clock, so a key activates on time without a reload.
 */
import type { Clock } from '../../shared/clock.js';
import type { Pool } from '../../shared/db.js';
import { PlatformError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { importSigningKey, type PublicJwk, type SigningKey } from './key-material.js';
import { publishedKeysAt, signingKeyAt, type RotationPolicy } from './key-schedule.js';
import { listKeys, type StoredKey } from './key-store.js';
import { revokeSigningKey, type RevocationResult } from './revocation.js';
import { runRotationStep, type RotationResult } from './rotation.js';

/** A stored key without its PEM: the private key lives only inside `signer`. */
interface LoadedKey extends Omit<StoredKey, 'privatePkcs8'> {
  readonly signer: SigningKey;
}

/** Keys loaded longer ago than this are reloaded in the background on the next use. */
export const STALE_AFTER_MS = 5 * 60_000;

export interface JwksDocument {
  keys: PublicJwk[];
}

export class KeyRing {
  private keys: LoadedKey[] = [];
  private loaded = false;
  private loading: Promise<void> | undefined;
  private loadedAt = 0;
  private background: Promise<void> | undefined;
  private reloading: Promise<void> | undefined;
  private reloadAgain: Promise<void> | undefined;
  private jwksCache: { ids: string; doc: JwksDocument } | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly policy: RotationPolicy,
    private readonly clock: Clock,
    private readonly log?: Logger,
  ) {}

  /** True once keys have been loaded at least once. */
  get ready(): boolean {
    return this.loaded;
  }

  /**
   * Makes sure keys are loaded and one signs: on first use runs a rotation step (which creates
   * the first key of a new database) and loads. Single flight.
   */
  ensureReady(): Promise<void> {
    if (this.loaded && this.signingKeyOrUndefined()) {
      this.reloadIfStale();
      return Promise.resolve();
    }
    this.loading ??= this.step()
      .then(() => undefined)
      .finally(() => {
        this.loading = undefined;
      });
    return this.loading;
  }

  /** Runs a rotation step at the clock's time, then reloads. */
  async step(): Promise<RotationResult> {
    const result = await runRotationStep(this.pool, this.policy, this.clock.now(), this.log);
    await this.reload();
    return result;
  }

  /**
   * A safety net for a process whose rotation timer is not running: keys older than
   * `STALE_AFTER_MS` are reloaded in the background (the request does not wait), so a key another
   * replica published is picked up long before it activates.
   */
  private reloadIfStale(): void {
    if (this.background || this.clock.now() - this.loadedAt < STALE_AFTER_MS) return;
    this.background = this.reload()
      .catch((err: unknown) => this.log?.warn({ err }, 'signing keys: background reload failed; keeping the loaded keys'))
      .finally(() => {
        this.background = undefined;
      });
  }

  /**
   * Revokes a key (revocation.ts) and reloads, so this replica stops publishing it and signing
   * with it before this resolves. Undefined when no key has this kid.
   */
  async revoke(kid: string, reason?: string): Promise<RevocationResult | undefined> {
    const result = await revokeSigningKey(this.pool, this.policy, kid, this.clock.now(), reason, this.log);
    await this.reload();
    return result;
  }

  /**
   * Reloads the keys from the database (another replica may have rotated or revoked). A call made
   * while a reload is in flight gets one more reload after it: the one in flight may have read the
   * table before the change the caller knows about, and must not have the last word.
   */
  reload(): Promise<void> {
    if (!this.reloading) {
      this.reloading = this.load().finally(() => {
        this.reloading = undefined;
      });
      return this.reloading;
    }
    this.reloadAgain ??= this.reloading
      .catch(() => undefined)
      .then(() => {
        this.reloadAgain = undefined;
        return this.reload();
      });
    return this.reloadAgain;
  }

  private async load(): Promise<void> {
    const stored = await listKeys(this.pool);
    const byKid = new Map(this.keys.map((k) => [k.kid, k]));
    this.keys = stored.map(({ privatePkcs8, ...record }) => {
      // The private key never changes under a kid; reuse the imported object.
      const signer = byKid.get(record.kid)?.signer ?? importSigningKey(record.kid, record.alg, privatePkcs8);
      return { ...record, signer };
    });
    this.loaded = true;
    this.loadedAt = this.clock.now();
  }

  private signingKeyOrUndefined(): SigningKey | undefined {
    return this.signingEntry()?.signer;
  }

  private signingEntry(): LoadedKey | undefined {
    return signingKeyAt(this.keys, this.clock.now());
  }

  /** The key that signs now. Throws 503 `unavailable` when none is loaded (call ensureReady first). */
  signingKey(): SigningKey {
    const k = this.signingEntry();
    if (!k) throw new PlatformError('unavailable', { detail: 'no signing key is available yet' });
    return k.signer;
  }

  /** The public keys to publish now (pending and still-verifying ones included). */
  jwks(): JwksDocument {
    const published = publishedKeysAt(this.keys, this.clock.now());
    const ids = published.map((k) => k.kid).join(' ');
    if (this.jwksCache?.ids !== ids) this.jwksCache = { ids, doc: { keys: published.map((k) => ({ ...k.publicJwk })) } };
    return this.jwksCache.doc;
  }

  /** Kid, algorithm and schedule of every loaded key (for tests and operators; no key material). */
  describe(): { kid: string; alg: string; createdAt: number; activateAt: number; retireAt: number | undefined }[] {
    return this.keys.map((r) => ({ kid: r.kid, alg: r.alg, createdAt: r.createdAt, activateAt: r.activateAt, retireAt: r.retireAt }));
  }
}
