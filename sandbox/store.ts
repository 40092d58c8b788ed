/**
 * What the sandbox providers accepted: every message, in arrival order, capped (oldest dropped
 * first); per (channel, provider, delivery id, address) how many requests arrived and how many
 * were accepted as new messages, which is what "no provider saw a delivery id twice" is checked
 * against. No provider here de-duplicates on our keys: FCM v1, SMTP and Twilio's Messages API
 * take none (what a recipient would see of a duplicate is display.ts's).
 */
import type { SandboxChannel } from './faults.js';

/** The replace identifiers a push message carried (as FCM received them). */
export interface PushReplaceIds {
  apns_collapse_id?: string;
  android_tag?: string;
  webpush_tag?: string;
}

/** One accepted message, in the JSON form GET /sandbox/messages returns. */
export interface SandboxMessage {
  id: string;
  channel: SandboxChannel;
  provider: string;
  to: string;
  delivery_id?: string;
  /** Epoch seconds. */
  received_at: number;
  from?: string;
  title?: string;
  body?: string;
  subject?: string;
  text?: string;
  html?: string;
  message_id?: string;
  /** E-mail: the References header's message ids. */
  references?: string[];
  data?: Record<string, string>;
  /** Push: the identifiers by which a device replaces a shown notification (display.ts). */
  replace_ids?: PushReplaceIds;
  /** SMS segments (160 GSM-7 / 70 UCS-2 characters, 153 / 67 when concatenated). */
  segments?: number;
  /** The provider's status (SMS: `queued`). */
  status?: string;
}

/** Requests and accepted sends for one (channel, provider, delivery id, address). */
export interface DeliveryCount {
  channel: SandboxChannel;
  provider: string;
  delivery_id: string;
  to: string;
  requests: number;
  accepted: number;
}

export interface MessageFilter {
  channel?: string;
  provider?: string;
  to?: string;
  delivery_id?: string;
}

export class MessageStore {
  readonly #max: number;
  #messages: SandboxMessage[] = [];
  #head = 0; // index of the oldest kept message in #messages (a lazily compacted queue)
  readonly #counts = new Map<string, DeliveryCount>();
  readonly #byId = new Map<string, SandboxMessage>();

  readonly #onAccept: ((m: SandboxMessage) => void) | undefined;

  /** @param onAccept told of every accepted message (the display model, display.ts). */
  constructor(maxMessages: number, onAccept?: (m: SandboxMessage) => void) {
    this.#max = maxMessages;
    this.#onAccept = onAccept;
  }

  /** Counts a request that carried `deliveryId` (before any fault decides its fate). */
  request(channel: SandboxChannel, provider: string, deliveryId: string | undefined, to: string): void {
    if (deliveryId) this.#count(channel, provider, deliveryId, to).requests++;
  }

  /** Records an accepted message. */
  accept(m: SandboxMessage): void {
    this.#messages.push(m);
    this.#byId.set(m.id, m);
    if (this.#messages.length - this.#head > this.#max) this.#dropOldest();
    if (m.delivery_id) this.#count(m.channel, m.provider, m.delivery_id, m.to).accepted++;
    this.#onAccept?.(m);
  }

  byId(id: string): SandboxMessage | undefined {
    return this.#byId.get(id);
  }

  list(filter: MessageFilter = {}): SandboxMessage[] {
    const out: SandboxMessage[] = [];
    for (let i = this.#head; i < this.#messages.length; i++) {
      const m = this.#messages[i]!;
      if (filter.channel !== undefined && m.channel !== filter.channel) continue;
      if (filter.provider !== undefined && m.provider !== filter.provider) continue;
      if (filter.to !== undefined && m.to !== filter.to) continue;
      if (filter.delivery_id !== undefined && m.delivery_id !== filter.delivery_id) continue;
      out.push(m);
    }
    return out;
  }

  get size(): number {
    return this.#messages.length - this.#head;
  }

  /** Counts for one delivery id, across channels, providers and addresses. */
  delivery(deliveryId: string): DeliveryCount[] {
    return [...this.#counts.values()].filter((c) => c.delivery_id === deliveryId);
  }

  /** Every (channel, provider, delivery id, address) accepted more than once. */
  duplicates(): DeliveryCount[] {
    return [...this.#counts.values()].filter((c) => c.accepted > 1);
  }

  clear(): void {
    this.#messages = [];
    this.#head = 0;
    this.#counts.clear();
    this.#byId.clear();
  }

  #count(channel: SandboxChannel, provider: string, deliveryId: string, to: string): DeliveryCount {
    const k = `${channel}\0${provider}\0${deliveryId}\0${to}`;
    let c = this.#counts.get(k);
    if (!c) {
      c = { channel, provider, delivery_id: deliveryId, to, requests: 0, accepted: 0 };
      this.#counts.set(k, c);
      // Counts are bounded like messages: the oldest go first (Map keeps insertion order).
      if (this.#counts.size > this.#max) this.#counts.delete(this.#counts.keys().next().value!);
    }
    return c;
  }

  #dropOldest(): void {
    const m = this.#messages[this.#head]!;
    this.#byId.delete(m.id);
    this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#messages.length) {
      this.#messages = this.#messages.slice(this.#head);
      this.#head = 0;
    }
  }
}

/** SMS segments of a text: GSM-7 when every character is in the basic set, else UCS-2. */
export function smsSegments(text: string): number {
  // GSM 03.38 basic set (the extension table counts as two characters, which we do not model).
  const gsm = /^[@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&'()*+,\-./0-9:;<=>?¡A-ZÄÖÑÜ§¿a-zäöñüà^{}\\[~\]|€]*$/.test(text);
  const units = gsm ? text.length : [...text].reduce((n, ch) => n + (ch.codePointAt(0)! > 0xffff ? 2 : 1), 0);
  const [single, multi] = gsm ? [160, 153] : [70, 67];
  if (units <= single) return 1;
  return Math.ceil(units / multi);
}
