/**
 * A Google service-account key file (the JSON a Firebase or Google Cloud console hands out): what
 * it takes to mint OAuth 2.0 access tokens with the JWT-bearer grant (RFC 7523), as FCM HTTP v1
 * requires. Read and checked once, at start, so a bad file stops the process with one line naming
 * what is wrong, never a key.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface ServiceAccountKey {
  /** The `iss` of every assertion. */
  clientEmail: string;
  /** `private_key_id`, sent as the assertion's `kid` when present. */
  keyId?: string;
  privateKey: KeyObject;
  /** Where assertions are exchanged for access tokens (`token_uri`, default Google's). */
  tokenUri: string;
  projectId?: string;
}

export const GOOGLE_TOKEN_URI = 'https://oauth2.googleapis.com/token';
/** The grant type of an assertion exchange (RFC 7523). */
export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** The OAuth 2.0 scope FCM HTTP v1 sends need. */
export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';

/** Reads and checks a key file; throws an Error saying what is wrong (never quoting the key). */
export function readServiceAccountKey(path: string): ServiceAccountKey {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`, { cause: err });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error('is not a JSON file');
  }
  return parseServiceAccountKey(json);
}

export function parseServiceAccountKey(json: unknown): ServiceAccountKey {
  if (json === null || typeof json !== 'object') throw new Error('is not a service-account key (not a JSON object)');
  const o = json as Record<string, unknown>;
  if (o['type'] !== 'service_account') throw new Error('is not a service-account key (type is not "service_account")');
  const clientEmail = o['client_email'];
  if (typeof clientEmail !== 'string' || !clientEmail.includes('@')) throw new Error('has no client_email');
  const pem = o['private_key'];
  if (typeof pem !== 'string' || !pem.includes('PRIVATE KEY')) throw new Error('has no private_key');
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch {
    throw new Error('has a private_key that is not a PEM private key');
  }
  if (privateKey.asymmetricKeyType !== 'rsa') throw new Error('has a private_key that is not an RSA key (RS256 is what Google accepts)');
  const tokenUri = o['token_uri'] ?? GOOGLE_TOKEN_URI;
  if (typeof tokenUri !== 'string' || !/^https?:\/\//.test(tokenUri)) throw new Error('has a token_uri that is not an http(s) URL');
  const key: ServiceAccountKey = { clientEmail, privateKey, tokenUri };
  if (typeof o['private_key_id'] === 'string' && o['private_key_id'] !== '') key.keyId = o['private_key_id'];
  if (typeof o['project_id'] === 'string' && o['project_id'] !== '') key.projectId = o['project_id'];
  return key;
}
