/**
 * The e-mail open pixel: `GET /api/v1/track/open/{delivery_id}.{signature}.gif`.
 *
 * The signature is an HMAC-SHA256 of the delivery id (NOTIFIER_TRACKING_SECRET), cut to 128
 * bits, so nobody can mark someone else's delivery opened by guessing or enumerating ids. A fetch
 * moves the delivery to `opened` (forward only). It is not proof that a person read the mail: mail
 * clients and security scanners fetch images on their own, and many clients block them; treat
 * `opened` from the pixel as a signal, not a fact.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { isUuid } from './advance.js';

export interface PixelSigner {
  readonly key: Buffer;
  /** Public origin the links point at (NOTIFIER_PUBLIC_URL), without a trailing slash. */
  readonly publicUrl: string;
}

export function pixelSigner(secret: string | undefined, publicUrl: string): PixelSigner {
  return { key: secret === undefined ? randomBytes(32) : Buffer.from(secret, 'utf8'), publicUrl: publicUrl.replace(/\/+$/, '') };
}

function mac(signer: PixelSigner, deliveryId: string): string {
  return createHmac('sha256', signer.key).update(deliveryId).digest().subarray(0, 16).toString('base64url');
}

/** The last path segment: `<delivery id>.<signature>.gif`. */
export function pixelFile(signer: PixelSigner, deliveryId: string): string {
  return `${deliveryId}.${mac(signer, deliveryId)}.gif`;
}

export function signedPixelUrl(signer: PixelSigner, deliveryId: string): string {
  return `${signer.publicUrl}/api/v1/track/open/${pixelFile(signer, deliveryId)}`;
}

/** The delivery id of a correctly signed pixel file name, else undefined. */
export function verifyPixelFile(signer: PixelSigner, file: string): string | undefined {
  const m = /^([0-9a-fA-F-]{36})\.([A-Za-z0-9_-]{22})\.gif$/.exec(file);
  if (!m || !isUuid(m[1]!)) return undefined;
  const want = Buffer.from(mac(signer, m[1]!.toLowerCase()));
  const got = Buffer.from(m[2]!);
  return got.length === want.length && timingSafeEqual(got, want) ? m[1]!.toLowerCase() : undefined;
}

/** A transparent 1×1 GIF. */
export const PIXEL_GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
