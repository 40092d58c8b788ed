/**
 * Amazon SES event publishing (and the older SES notifications), as the `Message` of an SNS
 * notification: a JSON string with `eventType` (`notificationType` in the older form), `mail`
 * (`messageId`: the id SES's SMTP interface answered with, `250 Ok <messageId>`) and one object
 * per type: `delivery`, `bounce` (`bounceType` Permanent, Transient or Undetermined;
 * `bouncedRecipients[].emailAddress`, `.status`, `.diagnosticCode`), `complaint`
 * (`complainedRecipients[].emailAddress`, `complaintFeedbackType`). Unknown fields and event types
 * are tolerated. Pure.
 */
import type { FeedbackEvent, Suppress } from './events.js';

export type SesParse = { ok: true; event: FeedbackEvent } | { ok: false; field: string; detail: string };

const obj = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function addresses(list: unknown, reason: Suppress['reason']): Suppress[] {
  if (!Array.isArray(list)) return [];
  const out: Suppress[] = [];
  for (const r of list) {
    const a = str(obj(r)?.emailAddress);
    // "Name <addr>" is tolerated: the address inside the brackets.
    const addr = a === undefined ? undefined : (/<([^>]+)>/.exec(a)?.[1] ?? a).trim().toLowerCase();
    if (addr !== undefined && addr.includes('@') && addr.length <= 320) out.push({ address: addr, reason });
  }
  return out;
}

/**
 * Reads one SES event. `eventKey` is the SNS MessageId that carried it (SNS repeats it on every
 * retry of the same notification).
 */
export function parseSesEvent(message: string, eventKey: string): SesParse {
  let doc: unknown;
  try {
    doc = JSON.parse(message);
  } catch {
    return { ok: false, field: 'Message', detail: 'is not JSON' };
  }
  const d = obj(doc);
  if (!d) return { ok: false, field: 'Message', detail: 'must be a JSON object' };
  const type = str(d.eventType) ?? str(d.notificationType);
  if (type === undefined) return { ok: false, field: 'Message.eventType', detail: 'must be a string' };
  const messageId = str(obj(d.mail)?.messageId);
  if (messageId === undefined) return { ok: false, field: 'Message.mail.messageId', detail: 'must be a string' };
  const base = { provider: 'ses' as const, channel: 'email' as const, eventKey, providerMessageId: messageId, providerType: type };
  switch (type) {
    case 'Delivery':
      return { ok: true, event: { ...base, kind: 'delivered', suppress: [] } };
    case 'Bounce': {
      const b = obj(d.bounce) ?? {};
      const bounceType = str(b.bounceType) ?? 'Undetermined';
      const sub = str(b.bounceSubType);
      const first = obj(Array.isArray(b.bouncedRecipients) ? b.bouncedRecipients[0] : undefined);
      const status = str(first?.status);
      const diagnostic = str(first?.diagnosticCode);
      const detail = [`${bounceType}${sub ? `/${sub}` : ''}`, status, diagnostic?.slice(0, 200)].filter(Boolean).join(' ');
      const permanent = bounceType === 'Permanent';
      const event: FeedbackEvent = {
        ...base,
        kind: permanent ? 'bounce_permanent' : 'bounce_transient',
        detail,
        suppress: permanent ? addresses(b.bouncedRecipients, 'bounce') : [],
      };
      if (status !== undefined) event.errorCode = status;
      return { ok: true, event };
    }
    case 'Complaint': {
      const c = obj(d.complaint) ?? {};
      const feedback = str(c.complaintFeedbackType);
      return {
        ok: true,
        event: {
          ...base,
          kind: 'complaint',
          detail: feedback ? `complaint (${feedback})` : 'complaint',
          suppress: addresses(c.complainedRecipients, 'complaint'),
        },
      };
    }
    default:
      return { ok: true, event: { ...base, kind: 'other', suppress: [] } };
  }
}
