/**
 * Configuration: read once at start from the environment, validated, frozen.
 *
 * Every variable the platform reads is declared once, with its default, a one-line description and
 * a parser: in the `env.ts` beside the composition root of the one process that reads it, or in
 * `shared/env.ts` when several do. bin/env-catalogue.ts gathers them; the README's configuration
 * table is checked against that catalogue by test/shared/config.test.ts. A service loads the subset it needs with `loadConfig`.
 * A missing or bad value throws a `ConfigError` whose message is one line naming the variable;
 * `main.ts` files print it and exit non-zero before listening.
 */
import { InternalError } from './errors.js';

/** A missing or invalid variable (`config_variable_invalid`); the message is one line naming it. */
export class ConfigError extends InternalError<'config_variable_invalid'> {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super('config_variable_invalid', `config: ${variable} ${problem}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

export type Service =
  'all' | 'limiter' | 'control-plane' | 'notifier' | 'identity' | 'console' | 'sandbox' | 'start' | 'cli' | 'healthcheck' | 'test';

export interface VarSpec<T> {
  /** The default as it would be written in the environment; `undefined` means required. */
  readonly default: string | undefined;
  readonly description: string;
  /** Which processes read it (for the README table). */
  readonly services: readonly Service[];
  /** Secrets are never printed back in error messages. */
  readonly secret?: boolean;
  /** When true, an unset variable yields `undefined` instead of an error. */
  readonly optional?: boolean;
  /** Parses a raw string; throws a plain Error whose message says what is wrong. */
  readonly parse: (raw: string) => T;
}

type Parsed<S> = S extends VarSpec<infer T> ? (S extends { optional: true } ? T | undefined : T) : never;
export type ConfigOf<S extends Record<string, VarSpec<unknown>>> = { readonly [K in keyof S]: Parsed<S[K]> };

/** Loads and validates the given variables from `env`; the result is frozen. */
export function loadConfig<S extends Record<string, VarSpec<unknown>>>(
  spec: S,
  env: Record<string, string | undefined> = process.env,
): ConfigOf<S> {
  const out: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(spec)) {
    const raw = env[name];
    const value = raw === undefined || raw === '' ? v.default : raw;
    if (value === undefined) {
      if (v.optional) {
        out[name] = undefined;
        continue;
      }
      throw new ConfigError(name, 'is required but not set');
    }
    try {
      out[name] = v.parse(value);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      const shown = v.secret ? '' : `, got ${JSON.stringify(value)}`;
      throw new ConfigError(name, `${why}${shown}`);
    }
  }
  return Object.freeze(out) as ConfigOf<S>;
}

/** Declares one variable: the identity function that makes TypeScript keep the spec's parsed type. */
export const v = <T>(spec: VarSpec<T>): VarSpec<T> => spec;

/** Picks variables from the catalogue by name, keeping their types. */
export function pick<C extends Record<string, VarSpec<unknown>>, K extends keyof C>(catalog: C, names: readonly K[]): Pick<C, K> {
  const out = {} as Pick<C, K>;
  for (const n of names) out[n] = catalog[n];
  return out;
}

// ── parsers ────────────────────────────────────────────────────────────────

export function int(min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): (raw: string) => number {
  return (raw) => {
    if (!/^-?\d+$/.test(raw.trim())) throw new Error(`must be an integer`);
    const n = Number(raw);
    if (n < min || n > max) throw new Error(`must be an integer between ${min} and ${max}`);
    return n;
  };
}

export function num(min = -Infinity, max = Infinity): (raw: string) => number {
  return (raw) => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) throw new Error('must be a number');
    if (n < min || n > max) throw new Error(`must be a number between ${min} and ${max}`);
    return n;
  };
}

export const port = (raw: string): number => {
  if (!/^\d+$/.test(raw.trim()) || Number(raw) > 65535) throw new Error('must be a port number between 0 and 65535');
  return Number(raw);
};

export const str = (raw: string): string => raw;

export function nonEmpty(raw: string): string {
  if (raw.trim() === '') throw new Error('must not be empty');
  return raw;
}

export function url(protocols: readonly string[]): (raw: string) => string {
  return (raw) => {
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw new Error(`must be a URL (${protocols.join(', ')})`);
    }
    if (!protocols.includes(u.protocol.replace(/:$/, ''))) throw new Error(`must be a URL with scheme ${protocols.join(' or ')}`);
    return raw.replace(/\/+$/, '');
  };
}

export const bool = (raw: string): boolean => {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new Error('must be true or false');
};

export function oneOf<const T extends string>(values: readonly T[]): (raw: string) => T {
  return (raw) => {
    if (!(values as readonly string[]).includes(raw)) throw new Error(`must be one of ${values.join(', ')}`);
    return raw as T;
  };
}

export function list<T>(item: (raw: string) => T): (raw: string) => T[] {
  return (raw) =>
    raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')
      .map((s, i) => {
        try {
          return item(s);
        } catch (err) {
          throw new Error(`item ${i + 1}: ${err instanceof Error ? err.message : String(err)}`);
        }
      });
}

/** Durations: `250ms`, `5s`, `2m`, `1h`, `14d`, or a bare number of milliseconds. Returns ms. */
/** A duration between `min` and `max` ms, the bounds named in the message as written. */
export function durationIn(raw: string, min: number, max: number, minText: string, maxText: string): number {
  const ms = duration(raw);
  if (ms < min || ms > max) throw new Error(`must be between ${minText} and ${maxText}`);
  return ms;
}

export function duration(raw: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!m) throw new Error('must be a duration such as 500ms, 5s, 2m, 1h or 14d');
  const n = Number(m[1]);
  const mult = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 'ms') as 'ms'];
  return Math.round(n * mult);
}

/** Byte sizes: `512`, `16kb`, `1mb`. Returns bytes. */
export function bytes(raw: string): number {
  const m = /^(\d+)(b|kb|mb|gb)?$/i.exec(raw.trim());
  if (!m) throw new Error('must be a size such as 16kb or 1mb');
  const mult = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(m[2] ?? 'b').toLowerCase() as 'b'];
  return Number(m[1]) * mult;
}
