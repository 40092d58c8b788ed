/**
 * The identifiers that make a second copy of a push replace the first on the device instead of
 * adding a second notification: what keeps a crash duplicate (a send repeated after a worker died
 * between the provider's acceptance and our record of it) out of the user's sight. Pure.
 *
 * All three are the delivery id, so every copy of one delivery (retries, a takeover after a crash,
 * the secondary provider) carries the same ones, and two deliveries never share one:
 * - iOS: the APNs header `apns-collapse-id` (at most 64 bytes): notifications with the same one are
 *   shown as a single notification, the latest replacing the earlier;
 * - Android: `android.notification.tag`: a notification with the same tag already in the drawer is
 *   replaced (without a tag each message adds an entry);
 * - web: the Notification API's `tag` (`webpush.notification.tag`): a notification with the same
 *   tag from the same origin replaces the one shown (silently, `renotify` being false).
 *
 * Not used, on purpose: Android `collapse_key` and the Web Push `Topic` header act only on messages
 * still waiting at the push service (a device offline); a crash duplicate is sent after the first
 * copy was accepted and normally already delivered, so they would not collapse it. And FCM keeps at
 * most four collapse keys per device while it is offline, dropping the others with no rule as to
 * which: a key per delivery would lose notifications for a device that was offline for five.
 *
 * What remains visible: a device shows the replacement as an update, and Android and iOS may alert
 * again when it arrives; a user who dismissed the first copy before the second arrived sees the
 * second. A foreground app that draws its own notifications must use `data.delivery_id` as its tag.
 */
import { createHash } from 'node:crypto';

/** APNs refuses a longer `apns-collapse-id`. */
export const APNS_COLLAPSE_ID_MAX_BYTES = 64;

export interface ReplaceIds {
  /** `apns.headers["apns-collapse-id"]`. */
  apnsCollapseId: string;
  /** `android.notification.tag` and `webpush.notification.tag`. */
  tag: string;
}

/**
 * The replace identifiers of a delivery: its id (a UUID, 36 bytes), or, for an id too long for
 * APNs, a base64url SHA-256 of it (43 bytes), the same on every attempt.
 */
export function replaceIds(deliveryId: string): ReplaceIds {
  const id =
    Buffer.byteLength(deliveryId, 'utf8') <= APNS_COLLAPSE_ID_MAX_BYTES
      ? deliveryId
      : createHash('sha256').update(deliveryId).digest('base64url');
  return { apnsCollapseId: id, tag: id };
}
