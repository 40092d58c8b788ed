/**
 * The sandbox's e-mail provider: the SMTP server's hooks. A recipient whose address asks for an
 * error (`fault-unavailable@…`, see faults.ts) or that a profile lists as invalid is refused at
 * RCPT TO; every other fault (configured rates, latency, `fault-timeout`, `fault-lost`) plays out
 * when the message has been received, before the answer to DATA. Accepted messages are recorded
 * with their Message-ID, X-Delivery-Id, subject, text and HTML.
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
          const id = core.newId();
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
          return { code: 250, text: `2.0.0 Ok: queued as ${id}` };
        },
        fail: (error) => SMTP_FAILURES[error],
        timedOut: () => ({ code: 451, text: '4.4.2 Timeout', close: true }),
      });
    },
  };
}
