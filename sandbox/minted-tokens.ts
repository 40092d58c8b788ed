/**
 * The access tokens the sandbox's Google token endpoint (google-oauth.ts) minted, and the service
 * account whose assertions it accepts. Apart from the endpoint so that the core, which the FCM
 * endpoint asks whether a token is valid, does not import the routes that take the core.
 */
import type { KeyObject } from 'node:crypto';

/** The service account whose assertions the sandbox accepts. */
export interface SandboxServiceAccount {
  clientEmail: string;
  publicKey: KeyObject;
}

/** Access tokens the token endpoint minted, with their expiry (epoch ms). */
export class MintedTokens {
  readonly #tokens = new Map<string, number>();
  /** Exchanges answered with a token. */
  issued = 0;

  add(token: string, expiresAtMs: number, nowMs: number): void {
    for (const [t, exp] of this.#tokens) if (exp <= nowMs) this.#tokens.delete(t);
    this.#tokens.set(token, expiresAtMs);
    this.issued++;
  }

  valid(token: string, nowMs: number): boolean {
    const exp = this.#tokens.get(token);
    return exp !== undefined && exp > nowMs;
  }

  clear(): void {
    this.#tokens.clear();
  }
}
