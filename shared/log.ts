/**
 * Structured JSON logs (pino) with secrets kept out.
 *
 * Redaction is by path (headers, known secret fields) and, as a second net, by value: anything
 * that looks like a card number (13–19 digits passing Luhn) or a bearer token in a string is
 * masked by `scrub`. Subjects that identify a caller are logged hashed (`hashSubject`).
 */
import { createHash } from 'node:crypto';
import { pino, type Logger, type DestinationStream, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

const SECRET_KEYS = [
  'authorization',
  'Authorization',
  'x-api-key',
  'X-API-Key',
  'api_key',
  'apiKey',
  'password',
  'new_password',
  'secret',
  'client_secret',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'code_verifier',
  'card_number',
  'cardNumber',
  'cookie',
  'set-cookie',
  'private_key',
  'privateKey',
  'd',
  'x-subject-secret',
  'X-Api-Key',
  'X-Subject-Secret',
  'Cookie',
  'Set-Cookie',
];

/** Paths pino censors: the keys above at the top level and up to two levels deep, and in headers. */
export const REDACT_PATHS: string[] = [
  ...SECRET_KEYS.map((k) => `["${k}"]`),
  ...SECRET_KEYS.map((k) => `*["${k}"]`),
  ...SECRET_KEYS.map((k) => `*.*["${k}"]`),
  ...SECRET_KEYS.map((k) => `req.headers["${k}"]`),
];

// Digits with optional single spaces or dashes between them, never ending on a separator.
const CARD_RE = /\b\d(?:[ -]?\d){12,18}\b/g;
const URL_CREDENTIALS_RE = /\b([a-z][a-z0-9+.-]*:\/\/)([^:/?#@\s]+):([^@/?#\s]+)@/gi;
const BEARER_RE = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi;
const JWT_RE = /\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g;

function luhn(digits: string): boolean {
  let sum = 0;
  let dbl = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (dbl) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    dbl = !dbl;
  }
  return sum % 10 === 0;
}

/** Masks card numbers, bearer credentials and JWTs inside free text. */
export function scrub(text: string): string {
  return text
    .replace(URL_CREDENTIALS_RE, '$1$2:[Redacted]@')
    .replace(BEARER_RE, '$1 [Redacted]')
    .replace(JWT_RE, '[Redacted JWT]')
    .replace(CARD_RE, (m) => {
      const digits = m.replace(/[ -]/g, '');
      return digits.length >= 13 && digits.length <= 19 && luhn(digits) ? '[Redacted card]' : m;
    });
}

function scrubDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrub(value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return value;
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, depth + 1));
  // Only plain objects are walked: Dates, Buffers, Maps and class instances keep their own JSON form.
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubDeep(v, depth + 1);
  return out;
}

/** A short, stable, non-reversible tag for a subject (API key hash, user id) in logs and traces. */
export function hashSubject(subject: string): string {
  return createHash('sha256').update('subject:').update(subject).digest('hex').slice(0, 16);
}

export interface LogOptions {
  level?: string;
  service: string;
  destination?: DestinationStream;
}

export function createLogger(opts: LogOptions): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? 'info',
    base: { service: opts.service },
    redact: { paths: REDACT_PATHS, censor: '[Redacted]' },
    formatters: {
      log: (obj) => scrubDeep(obj) as Record<string, unknown>,
    },
    hooks: {
      logMethod(args, method) {
        // The message string is scrubbed too: a token pasted into a message is still a token.
        const scrubbed = args.map((a) => (typeof a === 'string' ? scrub(a) : a)) as typeof args;
        method.apply(this, scrubbed);
      },
    },
    serializers: {
      err: (err: unknown) => {
        if (!(err instanceof Error)) return err;
        const code = (err as { code?: unknown }).code;
        return { type: err.name, message: scrub(err.message), code, stack: err.stack ? scrub(err.stack) : undefined };
      },
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}
