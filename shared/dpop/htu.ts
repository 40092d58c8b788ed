/**
 * The `htu` comparison of RFC 9449 §4.3: the HTTP target URI of the request, without its query and
 * fragment, compared after syntax- and scheme-based normalisation (RFC 3986 §6.2.2, §6.2.3):
 * scheme and host in lower case, the default port dropped, an empty path as `/`, percent-escapes of
 * unreserved characters decoded and the others in upper case. Dot segments are removed by the URL
 * parser. Only `http` and `https` URIs are proofs' targets.
 */

const UNRESERVED = /[A-Za-z0-9\-._~]/;

function normalisePath(path: string): string {
  if (path === '') return '/';
  if (!path.includes('%')) return path;
  return path.replace(/%([0-9A-Fa-f]{2})/g, (_m, hex: string) => {
    const ch = String.fromCharCode(parseInt(hex, 16));
    return UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
  });
}

/** The normal form of an `htu` (or of the URI a server expects), or undefined when it is not an http(s) URI. */
export function normaliseHtu(uri: string): string | undefined {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return undefined;
  if (u.username !== '' || u.password !== '') return undefined;
  // URL already lower-cases scheme and host and drops the default port.
  return `${u.protocol}//${u.host}${normalisePath(u.pathname)}`;
}

/**
 * The expected `htu` for a request: a public origin (scheme://host[:port], as the client sees the
 * server) and a path (the one the server routes). The path must be absolute; a query is dropped.
 */
export function expectedHtu(origin: string, path: string): string {
  const q = path.indexOf('?');
  const p = q < 0 ? path : path.slice(0, q);
  return normaliseHtu(origin.replace(/\/+$/, '') + (p.startsWith('/') ? p : `/${p}`)) ?? '';
}
