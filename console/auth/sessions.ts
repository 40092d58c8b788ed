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
 * Pending sign-ins (state, nonce, PKCE verifier, where to go after) are kept the same way for 10
 * minutes, keyed by the id in the sign-in cookie, and used once.
 */
import { randomBytes } from 'node:crypto';
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

function newId(): string {
  return randomBytes(32).toString('base64url');
}

export interface SessionStoreOptions {
  clock: Clock;
  idleMs: number;
  maxMs: number;
  maxSessions?: number;
  maxPending?: number;
}

export class SessionStore {
  // Map iteration order is insertion order: re-inserting on use keeps the least recently used first.
  private readonly sessions = new Map<string, Session>();
  private readonly pending = new Map<string, PendingSignIn>();
  private readonly maxSessions: number;
  private readonly maxPending: number;

  constructor(private readonly o: SessionStoreOptions) {
    this.maxSessions = o.maxSessions ?? 10_000;
    this.maxPending = o.maxPending ?? 10_000;
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

  /** Starts a sign-in; returns the id for the sign-in cookie. */
  begin(p: Omit<PendingSignIn, 'createdAt'>): string {
    const id = newId();
    this.pending.set(id, { ...p, createdAt: this.o.clock.now() });
    while (this.pending.size > this.maxPending) this.pending.delete(this.pending.keys().next().value!);
    return id;
  }

  /** The pending sign-in with this id, removed (it is used once); undefined once expired. */
  take(id: string | undefined): PendingSignIn | undefined {
    if (!id) return undefined;
    const p = this.pending.get(id);
    this.pending.delete(id);
    if (!p || this.o.clock.now() - p.createdAt >= SIGN_IN_TTL_MS) return undefined;
    return p;
  }

  /** Forgets expired sessions and sign-ins (run every minute). */
  sweep(): void {
    const now = this.o.clock.now();
    for (const [id, s] of this.sessions)
      if (now - s.lastSeenAt >= this.o.idleMs || now - s.createdAt >= this.o.maxMs) this.sessions.delete(id);
    for (const [id, p] of this.pending) if (now - p.createdAt >= SIGN_IN_TTL_MS) this.pending.delete(id);
  }
}
