/**
 * The in-app channel: "sending" is writing an item to the user's inbox. The inbox table belongs to
 * the notifier core, so the write is injected (`writeInbox`); this module adds what every channel
 * has: the deadline, a circuit breaker (the database is this channel's provider) and the result
 * mapping. `writeInbox` should be idempotent on the delivery id (an insert that ignores a
 * conflict): a write that outlives its deadline is reported as a `timeout` retry but may still
 * commit.
 */
import { retry, sent, type Channel, type OutboundMessage, type SendContext, type SendResult } from './channel.js';
import { ProviderGuard, type GuardDeps } from './breaker.js';

/** Writes one inbox item; resolves with its id (the delivery id is used when it returns nothing). */
export type WriteInbox = (msg: OutboundMessage, ctx: SendContext) => Promise<string | void>;

export interface InAppChannelOptions {
  writeInbox: WriteInbox;
  /** Provider name (default `inbox`). */
  provider?: string;
  timeoutMs: number;
}

export function createInAppChannel(opts: InAppChannelOptions, deps: GuardDeps): Channel {
  const provider = opts.provider ?? 'inbox';
  const guard = new ProviderGuard('in_app', provider, deps);
  return {
    name: 'in_app',
    provider,
    breakerState: () => guard.breaker.state,
    close: () => Promise.resolve(),
    send(msg: OutboundMessage, ctx: SendContext): Promise<SendResult> {
      return guard.run(ctx.deadlineMs, opts.timeoutMs, async (timeoutMs) => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<SendResult>((resolve) => {
          timer = setTimeout(() => resolve(retry('timeout', { detail: `inbox write took over ${timeoutMs} ms` })), timeoutMs);
        });
        const write = opts.writeInbox(msg, ctx).then(
          (id) => sent(typeof id === 'string' && id !== '' ? id : ctx.deliveryId),
          (err: unknown) => retry('inbox_write_failed', { detail: err instanceof Error ? err.message : String(err) }),
        );
        return Promise.race([write, late]).finally(() => clearTimeout(timer));
      });
    },
  };
}
