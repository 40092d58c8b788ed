/**
 * E-mail over SMTP with nodemailer's pooled transport (keep-alive connections, reused across
 * sends). Each message carries the delivery id three times: as its `Message-ID` (`<delivery
 * id@sender domain>`, so replies, bounces and feedback reports name the delivery), in `References`
 * (the same id: a relay that replaces the Message-ID, as Amazon SES does, keeps it) and in an
 * `X-Delivery-Id` header. All are the same on every attempt of a delivery: retries, a takeover after
 * a crash, the secondary provider (which sends with the same SMTP_FROM).
 *
 * Answers: accepted → sent (the provider's message id from the reply: SES's `250 Ok <id>`, or
 * `250 … queued as <id>`; else the Message-ID); SMTP 421 → retry `provider_unavailable`, 452 → `provider_quota_exceeded`, 451 →
 * `provider_internal`, other 4xx → `provider_error`; 5xx to RCPT TO (550/551/553…) → permanent
 * `invalid_recipient`; 530/534/535 → permanent `provider_auth_failed`; other 5xx → permanent
 * `provider_rejected`; no answer in time → retry `timeout`; no connection → retry
 * `connection_failed`. SMTP has no Retry-After.
 *
 * SMTP has no idempotency key and no way to ask whether a message was accepted, so there is no
 * `lookup`. A send that times out may still be delivered later by the pool (nodemailer cannot
 * cancel a message it has started), and a send repeated after a crash is delivered again: the
 * recipient then gets two copies under one Message-ID. Most clients list both (Outlook, Apple Mail,
 * Thunderbird by default); some mailboxes drop the second (Gmail is widely reported to); clients
 * that thread by References group them in one thread. Where the relay replaces the Message-ID
 * (SES), only References still ties the copies together (README, "What a crash can still
 * duplicate").
 */
import { createTransport, type Transporter } from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';
import { permanent, retry, sent, type Channel, type OutboundMessage, type SendContext, type SendResult } from './channel.js';
import { ProviderGuard, type GuardDeps } from './breaker.js';

export interface SmtpChannelOptions {
  /** Provider name in metrics, breaker and results (default `smtp`). */
  provider?: string;
  /** `smtp://[user:password@]host:port`, or `smtps://` for implicit TLS. */
  url: string;
  /** Sender (`From`), e.g. `Notifications <notifications@example.com>`. */
  from: string;
  /** Pooled connections. */
  poolSize: number;
  timeoutMs: number;
  /** Connect and greeting timeout, ms (default: timeoutMs). */
  connectTimeoutMs?: number;
}

export function createSmtpChannel(opts: SmtpChannelOptions, deps: GuardDeps): Channel {
  const provider = opts.provider ?? 'smtp';
  const guard = new ProviderGuard('email', provider, deps);
  const transport = createTransport(smtpPoolOptions(opts));
  const domain = senderDomain(opts.from);

  return {
    name: 'email',
    provider,
    breakerState: () => guard.breaker.state,
    close: async () => transport.close(),
    send(msg: OutboundMessage, ctx: SendContext): Promise<SendResult> {
      if (!msg.to) return Promise.resolve(permanent('missing_address', 'no e-mail address'));
      return guard.run(ctx.deadlineMs, opts.timeoutMs, (timeoutMs) =>
        withDeadline(sendOne(transport, opts.from, domain, msg, ctx), timeoutMs),
      );
    },
  };
}

/** The nodemailer pool options for an SMTP URL. */
export function smtpPoolOptions(opts: SmtpChannelOptions): SMTPPool.Options {
  const u = new URL(opts.url);
  if (u.protocol !== 'smtp:' && u.protocol !== 'smtps:') throw new Error(`SMTP URL must be smtp:// or smtps://, got ${u.protocol}`);
  const secure = u.protocol === 'smtps:';
  const o: SMTPPool.Options = {
    pool: true,
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port ? Number(u.port) : secure ? 465 : 587,
    secure,
    maxConnections: opts.poolSize,
    maxMessages: Infinity,
    connectionTimeout: opts.connectTimeoutMs ?? opts.timeoutMs,
    greetingTimeout: opts.connectTimeoutMs ?? opts.timeoutMs,
    // A connection silent for this long is dropped, so a hung server cannot hold the pool forever.
    socketTimeout: opts.timeoutMs,
    disableFileAccess: true,
    disableUrlAccess: true,
  };
  if (u.username) o.auth = { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) };
  return o;
}

/** A delivery's Message-ID, `<delivery id@domain>`: the same on every attempt. */
export function messageIdOf(deliveryId: string, domain: string): string {
  return `<${deliveryId}@${domain}>`;
}

/** The domain of the sender address, for Message-IDs. */
export function senderDomain(from: string): string {
  const addr = /<([^>]+)>/.exec(from)?.[1] ?? from;
  const at = addr.lastIndexOf('@');
  return at >= 0 ? addr.slice(at + 1).trim() || 'localhost' : 'localhost';
}

async function sendOne(
  transport: Transporter<SMTPPool.SentMessageInfo>,
  from: string,
  domain: string,
  msg: OutboundMessage,
  ctx: SendContext,
): Promise<SendResult> {
  try {
    const info = await transport.sendMail({
      from,
      to: msg.to,
      subject: msg.subject ?? msg.title ?? '',
      text: msg.text ?? msg.body,
      ...(msg.html !== undefined ? { html: msg.html } : {}),
      messageId: messageIdOf(ctx.deliveryId, domain),
      references: messageIdOf(ctx.deliveryId, domain),
      headers: { 'X-Delivery-Id': ctx.deliveryId },
    });
    return sent(providerMessageId(info.response) ?? info.messageId);
  } catch (err) {
    return classifySmtpError(err);
  }
}

/**
 * The provider's id for an accepted message, from the reply to DATA: Amazon SES's SMTP interface
 * answers `250 Ok <message id>` (the `mail.messageId` its event notifications carry, which is how
 * notifier/feedback joins them), Postfix-style servers `250 2.0.0 Ok: queued as <id>`. Undefined
 * when the reply names none.
 */
export function providerMessageId(response: string | undefined): string | undefined {
  const r = (response ?? '').trim();
  const queued = /queued as\s+([^\s]+)/i.exec(r)?.[1];
  if (queued !== undefined) return queued;
  return /^250[ -](?:\d\.\d\.\d+\s+)?Ok\s+([A-Za-z0-9][A-Za-z0-9._@-]{0,254})\s*$/i.exec(r)?.[1];
}

/** Maps a nodemailer error to a send result (see the module comment). */
export function classifySmtpError(err: unknown): SendResult {
  const e = err as { responseCode?: unknown; code?: unknown; command?: unknown; message?: unknown };
  const status = typeof e.responseCode === 'number' ? e.responseCode : undefined;
  const code = typeof e.code === 'string' ? e.code : undefined;
  const detail = `SMTP ${status ?? code ?? 'error'}${typeof e.command === 'string' ? ` at ${e.command}` : ''}`;
  if (status !== undefined) {
    if (status === 421) return retry('provider_unavailable', { detail });
    if (status === 452) return retry('provider_quota_exceeded', { detail });
    if (status === 451) return retry('provider_internal', { detail });
    if (status >= 400 && status < 500) return retry('provider_error', { detail });
    if (status === 530 || status === 534 || status === 535) return permanent('provider_auth_failed', detail);
    if (typeof e.command === 'string' && /^RCPT/i.test(e.command)) return permanent('invalid_recipient', detail);
    if ([550, 551, 553].includes(status) && code === 'EENVELOPE') return permanent('invalid_recipient', detail);
    if (status >= 500) return permanent('provider_rejected', detail);
  }
  if (code === 'ETIMEDOUT') return retry('timeout', { detail });
  if (code === 'ECONNECTION' || code === 'ESOCKET' || code === 'EDNS' || code === 'ETLS') return retry('connection_failed', { detail });
  if (code === 'EENVELOPE') return permanent('missing_address', detail);
  if (code === 'EAUTH') return permanent('provider_auth_failed', detail);
  return retry('provider_error', { detail: typeof e.message === 'string' ? `${detail}: ${e.message}` : detail });
}

/** Resolves with `p`, or with a `timeout` retry after `ms` (the late outcome is dropped). */
function withDeadline(p: Promise<SendResult>, ms: number): Promise<SendResult> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<SendResult>((resolve) => {
    timer = setTimeout(() => resolve(retry('timeout', { detail: `no answer within ${ms} ms` })), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
