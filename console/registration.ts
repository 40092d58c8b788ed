/**
 * Makes sure the console is registered at identity as a confidential OAuth client, and returns a
 * secret for it. `npm start` runs this once identity is ready, with identity's admin token
 * (IDENTITY_ADMIN_TOKEN, generated for the run when unset), then starts the console with the
 * secret: a new secret on every start (the old one stops working at once), so no secret is stored
 * anywhere but in the running console's environment.
 *
 * Elsewhere (Kubernetes, Docker), register the client once by hand with the same body (README,
 * "Operator console") and give the console CONSOLE_CLIENT_SECRET.
 */
import { CONSOLE_SCOPE } from './scope.js';

export interface RegistrationOptions {
  identityUrl: string;
  /** IDENTITY_ADMIN_TOKEN, or an admin's access token. */
  adminToken: string;
  clientId: string;
  /** CONSOLE_PUBLIC_URL + /auth/callback. */
  redirectUri: string;
  timeoutMs?: number;
}

/** The registration body: what identity is asked to store for the console. */
export function consoleClientRegistration(clientId: string, redirectUri: string): Record<string, unknown> {
  return {
    client_id: clientId,
    client_type: 'confidential',
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    scope: CONSOLE_SCOPE,
  };
}

/** Registers the console's client (or, when it exists as it should, gives it a new secret); returns the secret. */
export async function ensureConsoleClient(o: RegistrationOptions): Promise<{ clientSecret: string; created: boolean }> {
  const base = `${o.identityUrl.replace(/\/+$/, '')}/auth/admin/clients`;
  const headers = { authorization: `Bearer ${o.adminToken}`, 'content-type': 'application/json', accept: 'application/json' };
  const call = async (method: string, url: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(o.timeoutMs ?? 10_000),
    });
    const text = await res.text();
    let json: Record<string, unknown> = {};
    try {
      json = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      // below: the status says enough
    }
    return { status: res.status, json };
  };
  const fail = (what: string, r: { status: number; json: Record<string, unknown> }): Error =>
    new Error(`${what}: identity answered ${r.status} ${String(r.json.code ?? r.json.error ?? '')} ${String(r.json.detail ?? '')}`.trim());

  const want = consoleClientRegistration(o.clientId, o.redirectUri);
  const id = encodeURIComponent(o.clientId);
  const existing = await call('GET', `${base}/${id}`);
  if (existing.status === 200) {
    const same =
      existing.json.client_type === 'confidential' &&
      JSON.stringify(existing.json.redirect_uris) === JSON.stringify(want.redirect_uris) &&
      JSON.stringify([...((existing.json.grant_types as string[] | undefined) ?? [])].sort()) ===
        JSON.stringify([...(want.grant_types as string[])].sort());
    if (same) {
      const r = await call('POST', `${base}/${id}/secret`);
      if (r.status !== 200 || typeof r.json.client_secret !== 'string') throw fail('replacing the console client secret', r);
      return { clientSecret: r.json.client_secret, created: false };
    }
    // Registered differently (another redirect URI: CONSOLE_PUBLIC_URL changed): register it anew.
    const d = await call('DELETE', `${base}/${id}`);
    if (d.status !== 204 && d.status !== 404) throw fail('removing the old console client', d);
  } else if (existing.status !== 404) throw fail('reading the console client', existing);
  const r = await call('POST', base, want);
  if (r.status !== 201 || typeof r.json.client_secret !== 'string') throw fail('registering the console client', r);
  return { clientSecret: r.json.client_secret, created: true };
}
