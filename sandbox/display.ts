/**
 * What a recipient would see after the sandbox providers accepted messages: per push device, the
 * notifications its screen shows; per mailbox, the messages a mail client lists; per phone, the
 * SMS it received. This is how tests and benchmarks count duplicates *visible to the recipient*,
 * apart from duplicates *at the provider* (the same delivery accepted twice, store.ts).
 *
 * The providers themselves de-duplicate nothing on our keys here (FCM v1 and SMTP take no
 * idempotency key); what hides a repeated send is what the device or the mail client does with
 * identifiers the message carries:
 * - push: the device's platform decides which identifier it honours: iOS `apns-collapse-id`,
 *   Android `android.notification.tag`, web `webpush.notification.tag`. A message whose identifier
 *   equals that of a notification still shown replaces it; one without adds an entry. The sandbox
 *   learns a token's platform as FCM does, from the app's registration (`PUT /sandbox/devices/…`);
 *   a token it was never told about is taken as `android`. Dismissal is not modelled: every
 *   notification stays shown, so a replacement always finds its predecessor (the real window in which
 *   a user dismissed the first copy before the second arrived is documented, not simulated).
 * - e-mail: every copy is listed. Mail clients differ: Outlook, Apple Mail and Thunderbird (by
 *   default) list two messages with one Message-ID as two; Gmail is widely reported to drop the
 *   second. The model takes the conservative side (each copy visible) and also reports how many
 *   distinct Message-IDs a mailbox holds (what a de-duplicating mailbox would list) and how many
 *   threads (copies naming the same first `References` id, else the same Message-ID, are one
 *   thread in a client that threads by References; a relay such as SES replaces the Message-ID but
 *   keeps References).
 * - SMS: every message received is shown; SMS carries no identifier a phone could collapse on.
 */
import type { PushReplaceIds, SandboxMessage } from './store.js';

export const DEVICE_PLATFORMS = ['ios', 'android', 'web'] as const;
export type DevicePlatform = (typeof DEVICE_PLATFORMS)[number];

/** One notification on a device's screen, or one message in a mailbox or on a phone. */
export interface Shown {
  /** The provider message id of the copy shown (the latest, after replacements). */
  message_id: string;
  delivery_id?: string;
  /** The identifier a later copy would replace it by (push), or the Message-ID (e-mail). */
  key?: string;
  /** E-mail: the thread it joins (its first References id, else its Message-ID). */
  thread?: string;
  /** Later copies that replaced this one in place (push). */
  replaced: number;
  /** Epoch seconds the latest copy arrived. */
  shown_at: number;
}

export interface DisplayView {
  channel: 'push' | 'email' | 'sms';
  address: string;
  platform?: DevicePlatform;
  shown: Shown[];
  /** E-mail: Message-IDs held (what a mailbox that de-duplicates on Message-ID would list). */
  distinct_message_ids?: number;
  /** E-mail: threads (what a client threading by References shows as conversations). */
  threads?: number;
}

/** Counts per channel: what reached the recipient and how much of it was a visible duplicate. */
export interface DisplaySummary {
  /** Devices, mailboxes or phones that got something. */
  recipients: number;
  /** Accepted messages that reached them. */
  arrived: number;
  /** Entries shown now. */
  shown: number;
  /** Copies that replaced an earlier one in place (not visible as a second entry). */
  replaced: number;
  /** Entries beyond the first for the same (recipient, delivery id): duplicates the recipient sees. */
  visible_duplicates: number;
}

export class DisplayModel {
  readonly #max: number;
  readonly #platforms = new Map<string, DevicePlatform>();
  readonly #boxes = new Map<string, { channel: DisplayView['channel']; address: string; shown: Shown[]; arrived: number }>();
  #entries = 0;

  /** @param maxEntries entries kept in all; past it the recipients heard from longest ago are forgotten first. */
  constructor(maxEntries: number) {
    this.#max = maxEntries;
  }

  /** The platform of a push token, as the app's registration with the push service tells it. */
  register(token: string, platform: DevicePlatform): void {
    this.#platforms.set(token, platform);
  }

  platformOf(token: string): DevicePlatform {
    return this.#platforms.get(token) ?? 'android';
  }

  /** A message a provider accepted reaches its recipient. */
  accept(m: SandboxMessage): void {
    if (m.channel !== 'push' && m.channel !== 'email' && m.channel !== 'sms') return;
    const box = this.#box(m.channel, m.to);
    box.arrived++;
    const entry: Shown = { message_id: m.id, replaced: 0, shown_at: m.received_at };
    if (m.delivery_id !== undefined) entry.delivery_id = m.delivery_id;
    if (m.channel === 'push') {
      const key = replaceKey(this.platformOf(m.to), m.replace_ids);
      if (key !== undefined) {
        entry.key = key;
        const earlier = box.shown.findIndex((s) => s.key === key);
        if (earlier >= 0) {
          const prev = box.shown[earlier]!;
          box.shown[earlier] = { ...entry, replaced: prev.replaced + 1 };
          return;
        }
      }
    } else if (m.channel === 'email') {
      if (m.message_id !== undefined) entry.key = m.message_id;
      const thread = m.references?.[0] ?? m.message_id;
      if (thread !== undefined) entry.thread = thread;
    }
    box.shown.push(entry);
    if (++this.#entries > this.#max) this.#forgetOldest();
  }

  view(channel: DisplayView['channel'], address: string): DisplayView {
    const box = this.#boxes.get(boxKey(channel, address));
    const shown = box ? box.shown.map((s) => ({ ...s })) : [];
    const v: DisplayView = { channel, address, shown };
    if (channel === 'push') v.platform = this.platformOf(address);
    if (channel === 'email') {
      v.distinct_message_ids = new Set(shown.map((s) => s.key ?? s.message_id)).size;
      v.threads = new Set(shown.map((s) => s.thread ?? s.message_id)).size;
    }
    return v;
  }

  summary(): Record<DisplayView['channel'], DisplaySummary> {
    const out = {
      push: emptySummary(),
      email: emptySummary(),
      sms: emptySummary(),
    };
    for (const box of this.#boxes.values()) {
      const s = out[box.channel];
      s.recipients++;
      s.arrived += box.arrived;
      s.shown += box.shown.length;
      const seen = new Set<string>();
      for (const e of box.shown) {
        s.replaced += e.replaced;
        if (e.delivery_id === undefined) continue;
        if (seen.has(e.delivery_id)) s.visible_duplicates++;
        else seen.add(e.delivery_id);
      }
    }
    return out;
  }

  /** Forgets what was shown (not the device registrations: an app install outlives a test's messages). */
  clear(): void {
    this.#boxes.clear();
    this.#entries = 0;
  }

  #forgetOldest(): void {
    for (const [k, box] of this.#boxes) {
      this.#boxes.delete(k);
      this.#entries -= box.shown.length;
      if (this.#entries <= this.#max) return;
    }
  }

  #box(channel: DisplayView['channel'], address: string) {
    const k = boxKey(channel, address);
    let box = this.#boxes.get(k);
    if (!box) {
      box = { channel, address, shown: [], arrived: 0 };
      this.#boxes.set(k, box);
    }
    return box;
  }
}

/** The identifier this platform replaces a shown notification by, if the message carried it. */
export function replaceKey(platform: DevicePlatform, ids: PushReplaceIds | undefined): string | undefined {
  if (!ids) return undefined;
  switch (platform) {
    case 'ios':
      return ids.apns_collapse_id;
    case 'android':
      return ids.android_tag;
    case 'web':
      return ids.webpush_tag;
  }
}

const boxKey = (channel: string, address: string): string => `${channel}\0${address}`;

const emptySummary = (): DisplaySummary => ({ recipients: 0, arrived: 0, shown: 0, replaced: 0, visible_duplicates: 0 });
