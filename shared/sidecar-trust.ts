/**
 * What a service behind the sidecar may believe of the headers the sidecar sets (README, "Trust of
 * the client address").
 *
 * The sidecar removes every inbound header whose name starts with `X-Subject` and sets its own:
 * `X-Subject` (the quota subject), `X-Subject-Role`, `X-Subject-Address` (the client address it
 * limited the request by: the peer, or with LIMITER_TRUST_PROXY the last `X-Forwarded-For` entry,
 * the one the trusted proxy appended) and, when SERVICE_SECRET is set, `X-Subject-Secret`. A
 * service believes those headers only when `X-Subject-Secret` equals its own SERVICE_SECRET,
 * compared in constant time; with SERVICE_SECRET unset it believes none of them.
 *
 * The client address is `X-Subject-Address` when the sidecar vouches for the request, else the
 * socket's peer. `X-Forwarded-For` is never read here: its entries are whatever the client and
 * the proxies before the sidecar wrote, and its last one is the sidecar's own peer (the load
 * balancer behind LIMITER_TRUST_PROXY), which is one address for every client.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** The sidecar's client address, lower case as services read header names. */
export const SUBJECT_ADDRESS_HEADER = 'x-subject-address';
/** The shared secret that makes the sidecar's `X-Subject*` headers believable. */
export const SUBJECT_SECRET_HEADER = 'x-subject-secret';

/** Longer than any textual IPv6 address with a zone: not an address, so not believed. */
const MAX_ADDRESS_LENGTH = 64;

export interface SidecarTrust {
  /** True when the request carries the sidecar's secret: its `X-Subject*` headers are the sidecar's. */
  vouched(headers: Readonly<Record<string, string>>): boolean;
  /**
   * The address to limit or log a request by: `X-Subject-Address` when the sidecar vouches for the
   * request and sent one, else the socket's peer address.
   */
  clientAddress(ctx: { readonly headers: Readonly<Record<string, string>>; readonly remoteAddress: string }): string;
}

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** The trust a service with SERVICE_SECRET `serviceSecret` (undefined: unset) places in the sidecar's headers. */
export function sidecarTrust(serviceSecret: string | undefined): SidecarTrust {
  // Digests of equal length, so the comparison takes the same time whatever was presented.
  const expected = serviceSecret === undefined || serviceSecret === '' ? undefined : digest(serviceSecret);
  const vouched = (headers: Readonly<Record<string, string>>): boolean => {
    const presented = headers[SUBJECT_SECRET_HEADER];
    return expected !== undefined && presented !== undefined && timingSafeEqual(digest(presented), expected);
  };
  return {
    vouched,
    clientAddress(ctx) {
      if (!vouched(ctx.headers)) return ctx.remoteAddress;
      const address = ctx.headers[SUBJECT_ADDRESS_HEADER]?.trim();
      // A comma means the header came twice (the service joins repeats): not one address. The
      // sidecar sends exactly one, so this is only reachable by a holder of the secret.
      if (address === undefined || address === '' || address.length > MAX_ADDRESS_LENGTH || address.includes(',')) {
        return ctx.remoteAddress;
      }
      return address;
    },
  };
}
