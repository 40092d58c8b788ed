/**
 * Operator sessions, server-side: the browser holds only a random 256-bit id in the session
 * cookie; the tokens identity issued (access, refresh, ID) stay here and never reach a page.
 *
 * In memory, in this one console process (console/README.md, "Sessions"): a restart signs every
 * operator out, and two console replicas would each need sticky sessions. A session ends when it
 * has been idle CONSOLE_SESSION_IDLE, CONSOLE_SESSION_MAX after sign-in, at sign-out, or when its
 * refresh token stops working. The store is bounded: past `maxSessions` the least recently used
 * session is dropped.
 *
 * A pending sign-in (state, nonce, PKCE verifier, where to go after) is not kept here: it is the
 * sign-in cookie itself, sealed (AES-256-GCM under a key made at start), for 10 minutes. Anyone can
 * start a sign-in with one GET /auth/login, so a server-side table of them either grows without
 * bound or, capped, lets a flood of them push out the one an operator is completing. Only a
 * sign-in that reached the callback is remembered (its id, until its 10 minutes are over), so it
 * is used once; that set is capped too, past which the oldest is forgotten (only a stolen cookie
 * with its state could use it again, and the code it carried is single-use at identity anyway).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import type { Flash, Operator } from '../page.js';
import { newCsrfToken } from './csrf.js';

export interface Tokens {
  accessToken: string;
  /** When the access token expires (ms since the epoch). */
  accessExpiresAt: number;
  refreshToken?: string;
  idToken?: string;
}

export interface Session {
  readonly id: string;
  readonly csrfToken: string;
  readonly operator: Operator;
  readonly createdAt: number;
  lastSeenAt: number;
  tokens: Tokens;
  /** Messages for the next page shown (Post/Redirect/Get). */
  flash: Flash[];
  /** A refresh in flight, so concurrent requests share it. */
  refreshing?: Promise<Tokens>;
}

export interface PendingSignIn {
  readonly state: string;
  readonly nonce: string;
  readonly codeVerifier: string;
  /** A console path to return to. */
  readonly returnTo: string;
  readonly createdAt: number;
}

export const SIGN_IN_TTL_MS = 10 * 60_000;

/** A pending sign-in as sealed in its cookie (short names: the cookie is at most 4 KiB). */
interface SealedSignIn {
  i: string;
  s: string;
  n: string;
  v: string;
  r: string;
  t: number;
}

function newId(): string {
  return randomBytes(32).toString('base64url');
}

export interface SessionStoreOptions {
  clock: Clock;
  idleMs: number;
  maxMs: number;
  maxSessions?: number;
  /** Sign-ins remembered as used (default 100,000). */
  maxUsedSignIns?: number;
}

export class SessionStore {
  // Map iteration order is insertion order: re-inserting on use keeps the least recently used first.
  private readonly sessions = new Map<string, Session>();
  /** Ids of sign-ins taken, with when they began (insertion order is oldest first). */
  private readonly usedSignIns = new Map<string, number>();
  private readonly sealKey = randomBytes(32);
  private readonly maxSessions: number;
  private readonly maxUsedSignIns: number;

  constructor(private readonly o: SessionStoreOptions) {
    this.maxSessions = o.maxSessions ?? 10_000;
    this.maxUsedSignIns = o.maxUsedSignIns ?? 100_000;
  }

  get size(): number {
    return this.sessions.size;
  }

  create(operator: Operator, tokens: Tokens): Session {
    const now = this.o.clock.now();
    const s: Session = { id: newId(), csrfToken: newCsrfToken(), operator, createdAt: now, lastSeenAt: now, tokens, flash: [] };
    this.sessions.set(s.id, s);
    while (this.sessions.size > this.maxSessions) this.sessions.delete(this.sessions.keys().next().value!);
    return s;
  }

  /** The live session with this id, marked used; undefined (and forgotten) once expired. */
  get(id: string | undefined): Session | undefined {
    if (!id) return undefined;
    const s = this.sessions.get(id);
    if (!s) return undefined;
    const now = this.o.clock.now();
    if (now - s.lastSeenAt >= this.o.idleMs || now - s.createdAt >= this.o.maxMs) {
      this.sessions.delete(id);
      return undefined;
    }
    s.lastSeenAt = now;
    this.sessions.delete(id);
    this.sessions.set(id, s);
    return s;
  }

  /** Seconds the cookie should live: until the absolute end of the session. */
  cookieMaxAge(s: Session): number {
    return Math.ceil((s.createdAt + this.o.maxMs - this.o.clock.now()) / 1000);
  }

  delete(id: string | undefined): void {
    if (id) this.sessions.delete(id);
  }

  /** Starts a sign-in; returns the sign-in cookie's value (the sign-in, sealed; base64url). */
  begin(p: Omit<PendingSignIn, 'createdAt'>): string {
    // A browser keeps a cookie of at most 4 KiB: a very long way back is given up for the home page.
    const r = Buffer.byteLength(p.returnTo) > 2000 ? '/' : p.returnTo;
    const sealed: SealedSignIn = { i: newId(), s: p.state, n: p.nonce, v: p.codeVerifier, r, t: this.o.clock.now() };
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.sealKey, iv);
    const body = Buffer.concat([c.update(JSON.stringify(sealed), 'utf8'), c.final()]);
    return Buffer.concat([iv, c.getAuthTag(), body]).toString('base64url');
  }

  /** The sign-in sealed in this cookie value, marked used (it is taken once); undefined once expired, used, altered or forged. */
  take(cookie: string | undefined): PendingSignIn | undefined {
    if (!cookie || cookie.length > 8192) return undefined;
    const raw = Buffer.from(cookie, 'base64url');
    if (raw.length < 29) return undefined;
    let sealed: SealedSignIn;
    try {
      const d = createDecipheriv('aes-256-gcm', this.sealKey, raw.subarray(0, 12));
      d.setAuthTag(raw.subarray(12, 28));
      sealed = JSON.parse(Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8')) as SealedSignIn;
    } catch {
      return undefined;
    }
    const now = this.o.clock.now();
    if (now - sealed.t >= SIGN_IN_TTL_MS || this.usedSignIns.has(sealed.i)) return undefined;
    this.usedSignIns.set(sealed.i, sealed.t);
    while (this.usedSignIns.size > this.maxUsedSignIns) this.usedSignIns.delete(this.usedSignIns.keys().next().value!);
    return { state: sealed.s, nonce: sealed.n, codeVerifier: sealed.v, returnTo: sealed.r, createdAt: sealed.t };
  }

  /** Forgets expired sessions and sign-ins (run every minute). */
  sweep(): void {
    const now = this.o.clock.now();
    for (const [id, s] of this.sessions)
      if (now - s.lastSeenAt >= this.o.idleMs || now - s.createdAt >= this.o.maxMs) this.sessions.delete(id);
    for (const [id, t] of this.usedSignIns) if (now - t >= SIGN_IN_TTL_MS) this.usedSignIns.delete(id);
  }
}
