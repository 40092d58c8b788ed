/**
 * Polling for tests that wait on a real server (a queue drained, a snapshot received). Time logic
 * itself is tested with a fake clock, never with this.
 */
import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** Give up after this long. Default 5 000 ms. */
  timeoutMs?: number;
  /** Pause between attempts. Default 25 ms. */
  intervalMs?: number;
  /** Says what was awaited, in the timeout error. */
  what?: string;
}

/**
 * Calls `fn` until it returns something other than `false`, `undefined` or `null` and returns
 * that; an attempt that throws counts as not yet. Rejects after `timeoutMs` with the last error.
 */
export async function waitFor<T>(fn: () => T | Promise<T>, opts: WaitOptions = {}): Promise<Exclude<T, false | null | undefined>> {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const intervalMs = opts.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value !== false && value !== null && value !== undefined) return value as Exclude<T, false | null | undefined>;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? `: ${lastError.message}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'a condition'}${why}`, { cause: lastError });
    }
    await sleep(intervalMs);
  }
}
