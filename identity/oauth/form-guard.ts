/**
 * Anti-forgery tokens of the password forms (the sign-in page and the device page).
 *
 * Showing a form issues a token (256 random bits, in a hidden `csrf_token` input) bound to two
 * things: the browser it is shown to, through an HttpOnly, SameSite=Strict cookie holding another
 * random value (reused while the browser keeps it, so two tabs do not undo each other), and the
 * subject of the form (the authorization request's parameters, or the device's user code:
 * csrf.ts). The POST is accepted only with a token we issued, not expired, whose cookie and subject
 * both match; the comparisons are constant-time over SHA-256 digests (the lookup is by the
 * token's own SHA-256, which tells nothing about any other token). A token lives
 * {@link FORM_TOKEN_TTL_MS} (a device page's token no longer than its device code) and is deleted
 * once its form has succeeded, so a form cannot be posted twice.
 *
 * An attacker who fetches the page for themselves gets a token bound to their own cookie, which a
 * victim's browser does not send; a cross-site post does not carry the victim's cookie either
 * (SameSite=Strict), and is refused before that in any case (csrf.ts `crossSiteRefusal`).
 */
import type { Clock } from '../../shared/clock.js';
import type { Pool } from '../../shared/db.js';
import type { Logger } from '../../shared/log.js';
import { looksLikeOpaqueToken, newOpaqueToken, sha256 } from '../tokens/opaque.js';
import { formCookie, formCookieName, readFormCookie, sameDigest } from './csrf.js';
import { deleteFormToken, findFormToken, insertFormToken, purgeFormTokens } from './form-token-store.js';

/** How long a shown form may be posted. */
export const FORM_TOKEN_TTL_MS = 30 * 60_000;

/** The hidden input that carries the token. */
export const FORM_TOKEN_FIELD = 'csrf_token';

export interface IssuedFormToken {
  /** For the hidden input. */
  readonly token: string;
  /** For the `Set-Cookie` header of the page. */
  readonly setCookie: string;
}

/** Why a token is refused (for the log; the caller gets one answer for all). */
export type FormTokenProblem = 'missing' | 'no_cookie' | 'unknown' | 'expired' | 'other_browser' | 'other_subject';

export class FormGuard {
  private readonly cookieName: string;
  private readonly secure: boolean;
  private lastPurgeMs: number;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    issuer: string,
    private readonly log: Logger,
  ) {
    this.cookieName = formCookieName(issuer);
    this.secure = issuer.startsWith('https:');
    this.lastPurgeMs = clock.now();
  }

  /** Issues a token for a form about `subject`, shown to the browser of `headers`. */
  async issue(headers: Readonly<Record<string, string>>, subject: Buffer, notAfterMs = Infinity): Promise<IssuedFormToken> {
    const now = this.clock.now();
    const browser = readFormCookie(headers.cookie, this.cookieName) ?? newOpaqueToken();
    const token = newOpaqueToken();
    await insertFormToken(this.pool, {
      tokenSha256: sha256(token),
      browserSha256: sha256(browser),
      subjectSha256: subject,
      expiresAtMs: Math.min(now + FORM_TOKEN_TTL_MS, notAfterMs),
    });
    if (now - this.lastPurgeMs >= FORM_TOKEN_TTL_MS) {
      this.lastPurgeMs = now;
      void purgeFormTokens(this.pool, now).catch((err: unknown) => this.log.warn({ err }, 'oauth: purging expired form tokens failed'));
    }
    return { token, setCookie: formCookie(this.cookieName, browser, { secure: this.secure, maxAgeMs: FORM_TOKEN_TTL_MS }) };
  }

  /** Undefined when `presented` is a live token for this browser and `subject`; else why not. */
  async check(
    headers: Readonly<Record<string, string>>,
    presented: string | null | undefined,
    subject: Buffer,
  ): Promise<FormTokenProblem | undefined> {
    if (!presented || !looksLikeOpaqueToken(presented)) return 'missing';
    const browser = readFormCookie(headers.cookie, this.cookieName);
    if (!browser) return 'no_cookie';
    const row = await findFormToken(this.pool, sha256(presented));
    if (!row) return 'unknown';
    if (row.expiresAt <= this.clock.now()) return 'expired';
    // Both compared, always, so the time taken does not say which one differed.
    const sameBrowser = sameDigest(row.browserSha256, sha256(browser));
    const sameSubject = sameDigest(row.subjectSha256, subject);
    if (!sameBrowser) return 'other_browser';
    return sameSubject ? undefined : 'other_subject';
  }

  /** Retires a token once its form has done its work. */
  async consume(presented: string): Promise<void> {
    await deleteFormToken(this.pool, sha256(presented));
  }
}
