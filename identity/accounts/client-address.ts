/**
 * The client address a sign-in is throttled by. Behind the sidecar every request comes from the
 * sidecar's address; the sidecar appends the client's to `X-Forwarded-For` and sends the shared
 * secret in `X-Subject-Secret`. Only with that secret (SERVICE_SECRET, compared in constant time)
 * is the header's last entry trusted: anything before it was written by the client itself.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestContext } from '../../shared/http.js';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export function clientAddress(ctx: Pick<RequestContext, 'headers' | 'remoteAddress'>, serviceSecret: string | undefined): string {
  const presented = ctx.headers['x-subject-secret'];
  const forwarded = ctx.headers['x-forwarded-for'];
  if (serviceSecret && presented && forwarded && timingSafeEqual(digest(presented), digest(serviceSecret))) {
    const last = forwarded.split(',').pop()?.trim();
    if (last) return last.slice(0, 64);
  }
  return ctx.remoteAddress;
}
