/**
 * The sandbox's e-mail provider: the SMTP server's hooks. A recipient whose address asks for an
 * error (`fault-unavailable@…`, see faults.ts) or that a profile lists as invalid is refused at
 * RCPT TO; every other fault (configured rates, latency, `fault-timeout`, `fault-lost`) plays out
 * when the message has been received, before the answer to DATA. Accepted messages are recorded
 * with their Message-ID, X-Delivery-Id, subject, text and HTML, and answered as Amazon SES's SMTP
 * interface answers, `250 Ok <message id>`; the SES events about them follow (feedback.ts).
 */
import type { SandboxCore } from './core.js';
import type { FaultError } from './faults.js';
import { readMail } from './mail.js';
import type { SmtpHooks, SmtpReply } from './smtp.js';

/** SMTP renderings of the provider errors. */
export const SMTP_FAILURES: Record<FaultError, SmtpReply> = {
  UNAVAILABLE: { code: 421, text: '4.3.2 Service not available, closing transmission channel', close: true },
  QUOTA_EXCEEDED: { code: 452, text: '4.5.3 Too many messages, slow down' },
  INTERNAL: { code: 451, text: '4.3.0 Local error in processing' },
  INVALID_ARGUMENT: { code: 550, text: '5.1.1 Mailbox unavailable' },
  UNREGISTERED: { code: 550, text: '5.1.1 Mailbox unavailable' },
  UNAUTHENTICATED: { code: 535, text: '5.7.8 Authentication credentials invalid' },
};

const PROVIDER = 'primary';

/** An id shaped like SES's (`0100018c…-<uuid>-000000`): random, so it never repeats across restarts. */
function sesMessageId(core: SandboxCore): string {
  const hex = core.newId();
  return `0100${hex.slice(0, 12)}-${hex.slice(12, 20)}-${hex.slice(20, 24)}-${hex.slice(24, 28)}-${hex.slice(28, 32)}-${core.newId().slice(0, 12)}-000000`;
}

export function emailHooks(core: SandboxCore): SmtpHooks {
  return {
    recipient(address) {
      const outcome = core.decideAddressOnly('email', PROVIDER, address);
      if (outcome?.kind === 'error') {
        core.count('email', PROVIDER, 'error');
        return SMTP_FAILURES[outcome.error];
      }
      return undefined;
    },
    async message(envelope, data) {
      const mail = await readMail(data);
      const { deliveryId, messageId } = mail;
      const to = envelope.to[0] ?? '';
      for (const rcpt of envelope.to) core.store.request('email', PROVIDER, deliveryId, rcpt);
      return core.applyFault('email', PROVIDER, core.decide('email', PROVIDER, to), {
        accept: () => {
          const id = sesMessageId(core);
          for (const rcpt of envelope.to) {
            core.store.accept({
              id: envelope.to.length === 1 ? id : `${id}.${rcpt}`,
              channel: 'email',
              provider: PROVIDER,
              to: rcpt,
              from: envelope.from,
              received_at: core.nowSeconds(),
              ...(deliveryId !== undefined ? { delivery_id: deliveryId } : {}),
              ...(messageId !== undefined ? { message_id: messageId } : {}),
              ...(mail.references !== undefined ? { references: mail.references } : {}),
              ...(mail.subject !== undefined ? { subject: mail.subject } : {}),
              ...(mail.text !== undefined ? { text: mail.text } : {}),
              ...(mail.html !== undefined ? { html: mail.html } : {}),
            });
          }
          core.log.debug({ channel: 'email', provider: PROVIDER, delivery_id: deliveryId }, 'sandbox accepted an e-mail');
          if (envelope.to.length === 1) {
            const m = core.store.byId(id);
            if (m) core.feedback?.emailAccepted(m);
          }
          // Amazon SES's SMTP interface: `250 Ok <message id>`, the id its events name as mail.messageId.
          return { code: 250, text: `Ok ${id}` };
        },
        fail: (error) => SMTP_FAILURES[error],
        timedOut: () => ({ code: 451, text: '4.4.2 Timeout', close: true }),
      });
    },
  };
}
