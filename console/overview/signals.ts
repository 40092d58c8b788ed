/**
 * The overview's numbers, from one round of scrapes. Pure, apart from the counter totals it keeps
 * from the previous round (a rate needs two readings):
 *
 * - `dlq_depth`: dead letters not re-driven, summed over channels (notifier `dlq_depth`);
 * - `campaigns_pending`: campaigns with a fan-out waiting for approval (notifier
 *   `campaigns_pending_approval`);
 * - `sidecars_behind`: sidecars whose acked quota version is below the table's (control plane
 *   `quota_sidecar_applied_version{sidecar}` against `quota_table_version`);
 * - `breakers_open`: circuit breakers open in any scraped process (`circuit_breaker_state` = 2);
 * - `fail_open`: sidecars that admitted a request on their quota's fail mode since the last round
 *   (`ratelimit_decisions{result="fail_open"}` went up: the counter store is unreachable and
 *   requests go through unlimited);
 * - `deny_ratio`: of the sidecars' decisions since the last round, the share refused (`deny`,
 *   `fail_closed`, and `decoy`, an unknown API key's refusal); none when nothing was decided.
 *
 * A number whose source did not answer is `null` (a gap in its chart), never a stale value.
 */
import type { Sample } from './prom-text.js';

export type TargetKind = 'notifier' | 'control-plane' | 'identity' | 'sidecar';

export interface Scrape {
  readonly kind: TargetKind;
  /** The target's name on the page (`notifier`, or a sidecar's id). */
  readonly id: string;
  readonly url: string;
  /** Undefined when the scrape failed. */
  readonly samples?: readonly Sample[];
  readonly error?: string;
}

export const SIGNALS = ['dlq_depth', 'campaigns_pending', 'sidecars_behind', 'breakers_open', 'fail_open', 'deny_ratio'] as const;
export type SignalName = (typeof SIGNALS)[number];

export interface Signals {
  readonly values: Readonly<Record<SignalName, number | null>>;
  /** `service/breaker` of each open breaker. */
  readonly openBreakers: readonly string[];
  /** The ids of the sidecars behind. */
  readonly behind: readonly string[];
  /** The ids of the sidecars failing open. */
  readonly failingOpen: readonly string[];
}

const DENIED = new Set(['deny', 'fail_closed', 'decoy']);

function sum(samples: readonly Sample[], name: string, where: (l: Readonly<Record<string, string>>) => boolean = () => true): number {
  let n = 0;
  for (const s of samples) if (s.name === name && where(s.labels) && Number.isFinite(s.value)) n += s.value;
  return n;
}

function has(samples: readonly Sample[], name: string): boolean {
  return samples.some((s) => s.name === name);
}

/** The sidecar ids the control plane lists (those it reports an acked version for). */
export function listedSidecars(controlPlane: readonly Sample[]): string[] {
  const ids = new Set<string>();
  for (const s of controlPlane) if (s.name === 'quota_sidecar_applied_version' && s.labels['sidecar']) ids.add(s.labels['sidecar']);
  return [...ids].sort();
}

export class SignalDeriver {
  /** Per sidecar target, the decision counter totals by result at the last round. */
  private prev = new Map<string, Map<string, number>>();

  derive(scrapes: readonly Scrape[]): Signals {
    const one = (kind: TargetKind) => scrapes.find((s) => s.kind === kind);
    const notifier = one('notifier')?.samples;
    const cp = one('control-plane')?.samples;

    const dlq = notifier && has(notifier, 'dlq_depth') ? sum(notifier, 'dlq_depth') : null;
    const pending = notifier && has(notifier, 'campaigns_pending_approval') ? sum(notifier, 'campaigns_pending_approval') : null;

    let behind: string[] = [];
    let sidecarsBehind: number | null = null;
    if (cp) {
      const table = cp.find((s) => s.name === 'quota_table_version')?.value;
      if (table !== undefined) {
        behind = cp
          .filter((s) => s.name === 'quota_sidecar_applied_version' && s.value < table)
          .map((s) => s.labels['sidecar'] ?? '?')
          .sort();
        sidecarsBehind = behind.length;
      }
    }

    const openBreakers: string[] = [];
    let anyAnswered = false;
    for (const s of scrapes) {
      if (!s.samples) continue;
      anyAnswered = true;
      for (const x of s.samples)
        if (x.name === 'circuit_breaker_state' && x.value === 2) openBreakers.push(`${s.id}/${x.labels['breaker'] ?? '?'}`);
    }

    const failingOpen: string[] = [];
    let decided = 0;
    let denied = 0;
    let sidecarAnswered = false;
    const next = new Map<string, Map<string, number>>();
    for (const s of scrapes) {
      if (s.kind !== 'sidecar' || !s.samples) continue;
      sidecarAnswered = true;
      const totals = new Map<string, number>();
      for (const x of s.samples)
        if (x.name === 'ratelimit_decisions') totals.set(x.labels['result'] ?? '', (totals.get(x.labels['result'] ?? '') ?? 0) + x.value);
      next.set(s.url, totals);
      const before = this.prev.get(s.url);
      if (!before) continue;
      for (const [result, now] of totals) {
        const was = before.get(result) ?? 0;
        // A restarted sidecar starts its counters again from zero.
        const delta = now >= was ? now - was : now;
        decided += delta;
        if (DENIED.has(result)) denied += delta;
        if (result === 'fail_open' && delta > 0) failingOpen.push(s.id);
      }
    }
    this.prev = next;

    return {
      values: {
        dlq_depth: dlq,
        campaigns_pending: pending,
        sidecars_behind: sidecarsBehind,
        breakers_open: anyAnswered ? openBreakers.length : null,
        fail_open: sidecarAnswered ? failingOpen.length : null,
        deny_ratio: decided > 0 ? denied / decided : null,
      },
      openBreakers: openBreakers.sort(),
      behind,
      failingOpen: failingOpen.sort(),
    };
  }
}
