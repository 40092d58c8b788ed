/**
 * IDENTITY_BOOTSTRAP_ADMIN=<email>: the account with this address becomes an admin, once. At
 * start, and while it does not exist yet every {@link BOOTSTRAP_POLL_MS} (the operator signs up
 * after the first start), until it does; then it stops looking. "Once" is per account and across
 * restarts and replicas (promote.ts, `oncePerAccount`): an admin who is later demoted by an
 * operator stays demoted, and two replicas promoting at the same moment write one audit row.
 */
import type { Clock } from '../../shared/clock.js';
import type { Pool } from '../../shared/db.js';
import { hashSubject, type Logger } from '../../shared/log.js';
import { promoteToAdmin, type PromoteOutcome } from './promote.js';

export const BOOTSTRAP_POLL_MS = 2_000;
export const BOOTSTRAP_BY = 'bootstrap';

export interface AdminBootstrap {
  /** Resolves with the outcome once the account exists (or at close, with no_account). */
  readonly done: Promise<PromoteOutcome>;
  close(): void;
}

export function startAdminBootstrap(o: { pool: Pool; email: string; clock: Clock; log: Logger; pollMs?: number }): AdminBootstrap {
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let finish: (r: PromoteOutcome) => void = () => {};
  const done = new Promise<PromoteOutcome>((resolve) => (finish = resolve));
  const who = hashSubject(o.email.trim().toLowerCase());
  const attempt = async (): Promise<void> => {
    if (closed) return;
    let r: PromoteOutcome;
    try {
      r = await promoteToAdmin(o.pool, o.email, { by: BOOTSTRAP_BY, clock: o.clock, oncePerAccount: true });
    } catch (err) {
      o.log.warn({ err }, 'admin bootstrap: the promotion failed; trying again');
      schedule();
      return;
    }
    if (r.outcome === 'no_account') {
      schedule();
      return;
    }
    if (r.outcome === 'promoted')
      o.log.warn({ user_id: r.userId, email: who }, 'admin bootstrap: account promoted to admin (IDENTITY_BOOTSTRAP_ADMIN)');
    else o.log.info({ user_id: r.userId, outcome: r.outcome }, 'admin bootstrap: nothing to do');
    finish(r);
  };
  const schedule = (): void => {
    if (closed) return;
    timer = setTimeout(() => void attempt(), o.pollMs ?? BOOTSTRAP_POLL_MS);
    timer.unref();
  };
  o.log.info({ email: who }, 'admin bootstrap: looking for the account (IDENTITY_BOOTSTRAP_ADMIN)');
  void attempt();
  return {
    done,
    close: () => {
      closed = true;
      clearTimeout(timer);
      finish({ outcome: 'no_account' });
    },
  };
}
