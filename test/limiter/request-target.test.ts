// @tier: pure
/**
 * The sidecar's one canonical request target (limiter/request-target.ts): one example row per rule
 * of the module's doc comment and the attack paths of the ownership issue, then properties over
 * generated targets: idempotence, the shape of a canonical path, the refusals named by the rules
 * and nothing else, the ownership rule against the services' own router (`matchPattern`), and
 * agreement with the WHATWG URL parser where the two are meant to agree.
 */
import t from 'tap';
import fc from 'fast-check';
import { canonicalPath, isRefusal, queryRefusal } from '../../limiter/request-target.js';
import { defaultRoutes, RouteTable } from '../../limiter/routes.js';
import { matchPattern } from '../../shared/http.js';

const NOT_A_PATH = 'the request target must be a path starting with /';
const NOT_VISIBLE = 'the path holds a space, a control character or a non-ASCII byte; percent-encode it';
const BACKSLASH = 'the path holds a raw \\';
const SEMICOLON = 'the path holds a ; (path parameters are not accepted)';
const HASH = 'the path holds a raw # (a fragment is never sent to a server)';
const BAD_ESCAPE = 'the path holds a % that does not start a valid escape (%XX)';
const ENCODED_SEPARATOR = 'the path holds an encoded / or \\ (%2F, %5C)';
const ENCODED_CONTROL = 'the path holds an encoded control character';
const ABOVE_ROOT = 'the path climbs above the root with ..';
const QUERY_NOT_VISIBLE = 'the query holds a space, a control character or a non-ASCII byte; percent-encode it';

/** The canonical form, or the refusal's detail prefixed with `refused: `. */
function outcome(raw: string): string {
  const c = canonicalPath(raw);
  return typeof c === 'string' ? c : `refused: ${c.detail}`;
}
const refused = (detail: string): string => `refused: ${detail}`;

const EXAMPLES: readonly (readonly [rule: string, raw: string, expected: string])[] = [
  // 1. Visible ASCII only.
  ['1', '/a/b', '/a/b'],
  ['1', "/!$&'()*+,=:@-._~", "/!$&'()*+,=:@-._~"],
  ['1', '/a b', refused(NOT_VISIBLE)],
  ['1', '/a\tb', refused(NOT_VISIBLE)],
  ['1', '/a\x00', refused(NOT_VISIBLE)],
  ['1', '/a\x7f', refused(NOT_VISIBLE)],
  ['1', '/caf\u00e9', refused(NOT_VISIBLE)],
  ['1', '/\u{1F600}', refused(NOT_VISIBLE)],
  // 2. Origin-form; no raw \ or ;.
  ['2', '', refused(NOT_A_PATH)],
  ['2', 'a/b', refused(NOT_A_PATH)],
  ['2', '*', refused(NOT_A_PATH)],
  ['2', 'http://x/a', refused(NOT_A_PATH)],
  ['2', '/a\\b', refused(BACKSLASH)],
  ['2', '/a;b', refused(SEMICOLON)],
  ['2', '/a/b;', refused(SEMICOLON)],
  // 3. Escapes: %XX; unreserved decoded; the rest kept with upper-case hex; separators and controls refused.
  ['3', '/%', refused(BAD_ESCAPE)],
  ['3', '/a%4', refused(BAD_ESCAPE)],
  ['3', '/%zz', refused(BAD_ESCAPE)],
  ['3', '/%4g', refused(BAD_ESCAPE)],
  ['3', '/%%41', refused(BAD_ESCAPE)],
  ['3', '/%7E', '/~'],
  ['3', '/%7e', '/~'],
  ['3', '/a%2eb', '/a.b'],
  ['3', '/%41%5a%61%7A%30%39%2D%5F', '/AZaz09-_'],
  ['3', '/%3a', '/%3A'],
  ['3', '/%40', '/%40'],
  ['3', '/%c3%a9', '/%C3%A9'],
  ['3', '/%20', '/%20'],
  ['3', '/%3f%23', '/%3F%23'],
  ['3', '/%3B', '/%3B'],
  ['3', '/%80%fF', '/%80%FF'],
  ['3', '/%25', '/%25'],
  ['3', '/%252e', '/%252e'], // decoded once only: %25 stays, so no second escape appears
  ['3', '/%2F', refused(ENCODED_SEPARATOR)],
  ['3', '/a%2fb', refused(ENCODED_SEPARATOR)],
  ['3', '/%5C', refused(ENCODED_SEPARATOR)],
  ['3', '/%5c', refused(ENCODED_SEPARATOR)],
  ['3', '/%00', refused(ENCODED_CONTROL)],
  ['3', '/%09', refused(ENCODED_CONTROL)],
  ['3', '/%1F', refused(ENCODED_CONTROL)],
  ['3', '/%1f', refused(ENCODED_CONTROL)],
  ['3', '/%7F', refused(ENCODED_CONTROL)],
  // 4. Dot segments, after decoding; never above the root.
  ['4', '/a/./b', '/a/b'],
  ['4', '/a/../b', '/b'],
  ['4', '/a/%2e/b', '/a/b'],
  ['4', '/a/%2E%2e/b', '/b'],
  ['4', '/a/.%2e/b', '/b'],
  ['4', '/a/%2E./b', '/b'],
  ['4', '/a/..', '/'],
  ['4', '/.', '/'],
  ['4', '/...', '/...'],
  ['4', '/a/..b/.c', '/a/..b/.c'],
  ['4', '/..', refused(ABOVE_ROOT)],
  ['4', '/../a', refused(ABOVE_ROOT)],
  ['4', '/a/../..', refused(ABOVE_ROOT)],
  ['4', '/%2e%2e', refused(ABOVE_ROOT)],
  ['4', '/a/%2E%2E/%2e%2e/b', refused(ABOVE_ROOT)],
  // 5. Empty segments merged (before dot segments, as the services' router drops them); trailing / kept.
  ['5', '/', '/'],
  ['5', '//', '/'],
  ['5', '//a//b', '/a/b'],
  ['5', '/a/', '/a/'],
  ['5', '/a//', '/a/'],
  ['5', '/a/.', '/a/'],
  ['5', '/a/b/..', '/a/'],
  ['5', '/a//..', '/'],
  ['5', '/a//../b', '/b'],
  // The ownership issue's attack paths: all of them are bob's profile, or refused.
  ['issue', '/api/v1//users/bob/profile', '/api/v1/users/bob/profile'],
  ['issue', '/api/v1/users/alice/../bob/profile', '/api/v1/users/bob/profile'],
  ['issue', '/api/v1/users/alice/%2e%2e/bob/profile', '/api/v1/users/bob/profile'],
  ['issue', '/api/v1/./users/bob/profile', '/api/v1/users/bob/profile'],
  ['issue', '/api/v1/%75sers/bob/profile', '/api/v1/users/bob/profile'],
  ['issue', '/api/v1/users;x/bob/profile', refused(SEMICOLON)],
  ['issue', '/api/v1/track/../users/bob/profile', '/api/v1/users/bob/profile'],
  ['issue', '/pub/../t/secret', '/t/secret'],
];

t.test('one example per rule of the canonical form, and the attack paths', async (t) => {
  for (const [rule, raw, expected] of EXAMPLES) {
    t.equal(outcome(raw), expected, `rule ${rule}: ${JSON.stringify(raw)}`);
  }
  // The refusal is a typed value, never a string that could be taken for a path.
  const r = canonicalPath('/..');
  t.ok(isRefusal(r), 'a refusal is recognised by isRefusal');
  t.notOk(isRefusal(canonicalPath('/a')), 'a path is not a refusal');
});

// A raw `#` is not a path character (RFC 3986 pchar), yet uWS's getUrl() hands it to the sidecar
// (`GET /a#b/c` arrives as `/a#b/c`), rule 1 accepts it and the sidecar forwards it. A WHATWG or
// url.parse-based upstream (Express, `new URL(req.url, base)`) reads everything after it as a
// fragment: it routes `/admin#x` as `/admin`, which the sidecar matched as `/` (not on a segment
// boundary of `/admin`). That is the divergence rule 2 exists to prevent for `\` and `;`.
t.test('a raw # in the path is refused (a WHATWG upstream would cut the path there)', async (t) => {
  for (const raw of ['/admin#x', '/api/v1/track#/x', '/a#']) {
    t.ok(
      isRefusal(canonicalPath(raw)),
      `${raw} is refused (today: ${outcome(raw)}; WHATWG pathname: ${new URL(raw, 'http://x').pathname})`,
    );
  }
});

// ---- Generated targets ----

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const isUnreservedByte = (b: number): boolean => b < 0x80 && UNRESERVED.test(String.fromCharCode(b));

/** A percent-escape of a random byte, each hex digit in either case; interesting bytes weighted up. */
const INTERESTING_BYTES = [
  0x2e, 0x2f, 0x5c, 0x00, 0x1f, 0x7f, 0x7e, 0x75, 0x41, 0x3a, 0x40, 0x25, 0x23, 0x3f, 0x3b, 0x20, 0x80, 0xc3, 0xff,
];
const escapeArb = fc
  .tuple(fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(...INTERESTING_BYTES)), fc.boolean(), fc.boolean())
  .map(([b, up1, up2]) => {
    const h = b.toString(16).padStart(2, '0');
    return `%${up1 ? h.charAt(0).toUpperCase() : h.charAt(0)}${up2 ? h.charAt(1).toUpperCase() : h.charAt(1)}`;
  });
const badEscapeArb = fc.constantFrom('%', '%4', '%g1', '%%');
const wordArb = fc.oneof(
  fc.constantFrom('a', 'b', 'api', 'v1', 'users', 'bob', 'alice', 'profile', 'x.y', '~u', 'A-Z_0', '..b', '.c'),
  fc.stringMatching(/^[a-zA-Z0-9._~-]{1,5}$/),
);
// Raw characters: visible ASCII and a few that are not. Never `?`: the caller (uWS getUrl) splits
// the query off at the first `?`, so a path handed to canonicalPath cannot hold one.
const rawCharArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .integer({ min: 0x21, max: 0x7e })
      .filter((c) => c !== 0x3f)
      .map((c) => String.fromCharCode(c)),
  },
  { weight: 1, arbitrary: fc.constantFrom(' ', '\t', '\x00', '\x1f', '\x7f', '\u00e9', '\u2028', '\u{1F600}') },
);
const pieceArb = fc.oneof(
  { weight: 8, arbitrary: wordArb },
  { weight: 4, arbitrary: escapeArb },
  { weight: 1, arbitrary: rawCharArb },
  { weight: 1, arbitrary: badEscapeArb },
);
const dotsArb = fc.constantFrom('.', '..', '%2e', '%2E', '.%2e', '%2E.', '%2e%2E', '...');
const segmentArb = fc.oneof(
  { weight: 10, arbitrary: fc.array(pieceArb, { minLength: 1, maxLength: 3 }).map((p) => p.join('')) },
  { weight: 4, arbitrary: dotsArb },
  { weight: 2, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.tuple(wordArb, wordArb).map(([a, b]) => `${a};${b}`) },
);
/** A raw path: mostly origin-form, now and then not. */
const targetArb = fc
  .tuple(
    fc.oneof({ weight: 30, arbitrary: fc.constant('/') }, { weight: 1, arbitrary: fc.constantFrom('', 'a', '*', 'http://x/') }),
    fc.array(segmentArb, { maxLength: 8 }),
  )
  .map(([head, segs]) => head + segs.join('/'));

const RUNS = 2000;

/** Runs a property over generated targets and returns how many of them were accepted. */
function forAccepted(arb: fc.Arbitrary<string>, check: (raw: string, c: string) => void): number {
  let accepted = 0;
  fc.assert(
    fc.property(arb, (raw) => {
      const c = canonicalPath(raw);
      if (typeof c !== 'string') return;
      accepted += 1;
      check(raw, c);
    }),
    { numRuns: RUNS },
  );
  return accepted;
}

/** The escapes of a string, as byte values and their hex text. */
function escapesOf(s: string): { byte: number; hex: string }[] {
  return [...s.matchAll(/%([0-9A-Fa-f]{2})/g)].map((m) => ({ byte: parseInt(m[1]!, 16), hex: m[1]! }));
}

t.test('property: canonicalising a canonical path changes nothing', async (t) => {
  const accepted = forAccepted(targetArb, (raw, c) => {
    if (canonicalPath(c) !== c) throw new Error(`${JSON.stringify(raw)} -> ${c} -> ${outcome(c)}`);
  });
  t.ok(accepted >= RUNS / 3, `enough generated targets are accepted to mean something (${accepted}/${RUNS})`);
});

t.test('property: the shape of a canonical path', async (t) => {
  let withEscapes = 0;
  const accepted = forAccepted(targetArb, (raw, c) => {
    const why = (what: string): Error => new Error(`${JSON.stringify(raw)} -> ${JSON.stringify(c)}: ${what}`);
    if (!c.startsWith('/')) throw why('does not start with /');
    if (c.includes('//')) throw why('holds //');
    if (c.split('/').some((s) => s === '.' || s === '..')) throw why('holds a dot segment');
    if (/[^\x21-\x7e]/.test(c)) throw why('holds a byte that is not visible ASCII');
    if (/[\\;#]/.test(c)) throw why('holds a raw \\, ; or #');
    if (/%(?![0-9A-F]{2})/.test(c)) throw why('holds a % that is not an upper-case escape');
    const escapes = escapesOf(c);
    if (escapes.length > 0) withEscapes += 1;
    for (const e of escapes) {
      if (isUnreservedByte(e.byte)) throw why(`escapes the unreserved %${e.hex}`);
      if (e.byte === 0x2f || e.byte === 0x5c) throw why(`holds the encoded separator %${e.hex}`);
      if (e.byte < 0x20 || e.byte === 0x7f) throw why(`holds the encoded control %${e.hex}`);
    }
    if (/%2F|%5C|%00/i.test(c)) throw why('holds %2F, %5C or %00');
  });
  t.ok(accepted >= RUNS / 3, `enough accepted (${accepted}/${RUNS})`);
  t.ok(withEscapes >= RUNS / 20, `enough canonical paths keep an escape (${withEscapes}/${RUNS})`);
});

/**
 * Every reason the doc comment gives for refusing a raw path that applies to it, computed
 * independently of the code: a target is refused exactly when one applies, and with one of them.
 */
function reasonsToRefuse(x: string): Set<string> {
  const out = new Set<string>();
  if (!x.startsWith('/')) out.add(NOT_A_PATH);
  if (/[^\x21-\x7e]/u.test(x)) out.add(NOT_VISIBLE);
  if (x.includes('\\')) out.add(BACKSLASH);
  if (x.includes(';')) out.add(SEMICOLON);
  if (x.includes('#')) out.add(HASH);
  if (/%(?![0-9A-Fa-f]{2})/.test(x)) out.add(BAD_ESCAPE);
  for (const e of escapesOf(x)) {
    if (e.byte === 0x2f || e.byte === 0x5c) out.add(ENCODED_SEPARATOR);
    if (e.byte < 0x20 || e.byte === 0x7f) out.add(ENCODED_CONTROL);
  }
  // Depth after merging empty segments, with encoded dots read as dots.
  let depth = 0;
  const dotted = x.replace(/%[0-9A-Fa-f]{2}/g, (m) => (m.toLowerCase() === '%2e' ? '.' : m));
  for (const seg of dotted.split('/').slice(1)) {
    if (seg === '' || seg === '.') continue;
    depth += seg === '..' ? -1 : 1;
    if (depth < 0) {
      out.add(ABOVE_ROOT);
      break;
    }
  }
  return out;
}

t.test('property: a target is refused exactly when a rule refuses it, and says which', async (t) => {
  const seen = new Set<string>();
  fc.assert(
    fc.property(targetArb, (raw) => {
      const c = canonicalPath(raw);
      const reasons = reasonsToRefuse(raw);
      if (typeof c === 'string') {
        if (reasons.size > 0) throw new Error(`${JSON.stringify(raw)} accepted as ${c} despite: ${[...reasons].join('; ')}`);
        return;
      }
      if (!reasons.has(c.detail))
        throw new Error(`${JSON.stringify(raw)} refused with "${c.detail}", expected one of: ${[...reasons].join('; ')}`);
      seen.add(c.detail);
    }),
    // One example per refusal first: a target with several faults names only one of them, so
    // random targets alone can miss a rule in a run (CI once drew no target refused for its `\`).
    {
      numRuns: RUNS,
      examples: [['relative'], ['/a b'], ['/a\\b'], ['/a;b'], ['/a#b'], ['/a%zzb'], ['/a%2Fb'], ['/a%01b'], ['/a/../..']],
    },
  );
  t.same(
    [...seen].sort(),
    [NOT_A_PATH, NOT_VISIBLE, BACKSLASH, SEMICOLON, HASH, BAD_ESCAPE, ENCODED_SEPARATOR, ENCODED_CONTROL, ABOVE_ROOT].sort(),
    'every refusal was generated',
  );
});

// ---- The ownership rule against the services' router ----

const table = new RouteTable(defaultRoutes('http://n', 'http://i'));

/** Targets aimed at /api/v1/users/{id}/…, spelled every way the issue found and then some. */
const userTargetArb = fc
  .tuple(
    fc.constantFrom(
      '/api/v1/users',
      '/api/v1//users',
      '/api/v1/./users',
      '/api/v1/%75sers',
      '/api/v1/%75%73%65%72%73',
      '/api/%76%31/users',
      '/api/v1/track/../users',
      '/api/v1/users/alice/..',
      '/api/v1/users/alice/%2e%2e',
      '/api/v1/usersx',
      '/api/v1/user',
      '/api/v2/users',
    ),
    // Mostly one segment for the id, so that many targets reach the profile route.
    fc.oneof(
      { weight: 3, arbitrary: segmentArb.map((s) => [s]) },
      { weight: 1, arbitrary: fc.array(segmentArb, { minLength: 1, maxLength: 3 }) },
    ),
    fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('/profile', '/profile/', '//profile', '/./profile', '/%70rofile') },
      { weight: 3, arbitrary: fc.constantFrom('', '/', '/x/..', '/..', '/%2e%2e/profile', '/profile/x') },
    ),
  )
  .map(([prefix, segs, suffix]) => prefix + segs.map((s) => '/' + s).join('') + suffix);

t.test('property: the edge checks the user id the services router hands its handler', async (t) => {
  let profiles = 0;
  let owned = 0;
  const accepted = forAccepted(userTargetArb, (raw, c) => {
    const owner = table.ownerOf(c);
    const why = (what: string): Error => new Error(`${JSON.stringify(raw)} -> ${JSON.stringify(c)}: ${what}`);
    // Any route the services register under /api/v1/users/:user_id gets this id, or none.
    const any = matchPattern('/api/v1/users/:user_id/*', c);
    if (any?.[0] !== owner) throw why(`router id ${JSON.stringify(any?.[0])}, edge owner ${JSON.stringify(owner)}`);
    for (const pattern of ['/api/v1/users/:user_id', '/api/v1/users/:user_id/profile']) {
      const params = matchPattern(pattern, c);
      if (params === undefined) continue;
      if (params[0] !== owner) throw why(`${pattern} gives ${JSON.stringify(params[0])}, edge owner ${JSON.stringify(owner)}`);
      if (pattern.endsWith('/profile')) profiles += 1;
    }
    if (owner !== undefined) {
      owned += 1;
      if ([...owner].some((ch) => ch === '/' || ch === '\\' || ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f))
        throw why(`owner ${JSON.stringify(owner)} holds a separator or a control`);
    }
  });
  t.ok(accepted >= RUNS / 3, `enough accepted (${accepted}/${RUNS})`);
  t.ok(owned >= RUNS / 5, `enough paths have an owner (${owned}/${RUNS})`);
  t.ok(profiles >= RUNS / 10, `enough paths are a profile (${profiles}/${RUNS})`);
});

// ---- Agreement with the WHATWG URL parser ----

/**
 * WHATWG's path percent-encode set, restricted to visible ASCII: the URL parser escapes these
 * where we keep them raw. Both spellings decode to the same bytes, and the services' router
 * decodes path parameters, so this is a difference of spelling only (`?` and `#` also end the path
 * for it: `?` never reaches canonicalPath, `#` is the bug above).
 */
const whatwgEscaped = (c: string): string => c.replace(/["<>`{}]/g, (ch) => '%' + ch.charCodeAt(0).toString(16).toUpperCase());
/** Our escape rules applied to a WHATWG pathname: unreserved escapes decoded, the rest upper-case. */
const normalizeEscapes = (p: string): string =>
  p.replace(/%[0-9A-Fa-f]{2}/g, (m) => {
    const b = parseInt(m.slice(1), 16);
    return isUnreservedByte(b) ? String.fromCharCode(b) : m.toUpperCase();
  });

t.test('property: the URL parser leaves a canonical path as it is', async (t) => {
  const accepted = forAccepted(targetArb, (raw, c) => {
    // `#` is excluded here only because the test above already fails on it.
    if (c.includes('#')) return;
    const p = new URL(c, 'http://x').pathname;
    if (p !== whatwgEscaped(c)) throw new Error(`${JSON.stringify(raw)} -> ${c}, URL pathname ${p}`);
  });
  t.ok(accepted >= RUNS / 3, `enough accepted (${accepted}/${RUNS})`);
});

/**
 * Node 20's URL parser (ada 2.9) leaves dot segments in place after a segment that starts with a
 * dot but is not one: `new URL('/a/.b/..', base).pathname` is `/a/.b/..`, not `/a/` (ada-url/ada
 * #935, fixed in later ada releases). That is the reference's bug, not ours: such raw paths are
 * left out of the comparison while the running parser has it, and compared again once it is fixed.
 * Our canonical paths hold no dot segments, so the property above is not affected.
 */
const ADA_DOT_FOLDER_BUG = new URL('/a/.b/..', 'http://x').pathname !== '/a/';
const hasDotFolder = (raw: string): boolean =>
  raw
    .replace(/%2e/gi, '.')
    .split('/')
    .some((s) => s.startsWith('.') && s !== '.' && s !== '..');

t.test('property: the URL parser resolves an accepted raw path as we do, once // is merged', async (t) => {
  let compared = 0;
  const accepted = forAccepted(targetArb, (raw, c) => {
    if (raw.includes('#')) return; // as above
    if (ADA_DOT_FOLDER_BUG && hasDotFolder(raw)) return;
    compared += 1;
    // Merged first: WHATWG keeps empty segments, so `..` after `//` pops the empty one (see below),
    // and a leading `//` would be read as an authority.
    const p = normalizeEscapes(new URL(raw.replace(/\/{2,}/g, '/'), 'http://x').pathname);
    if (p !== whatwgEscaped(c)) throw new Error(`${JSON.stringify(raw)} -> ${c}, URL pathname normalised ${p}`);
  });
  t.ok(accepted >= RUNS / 3, `enough accepted (${accepted}/${RUNS})`);
  t.ok(compared >= RUNS / 4, `enough compared (${compared}/${RUNS})`);
});

t.test('where the URL parser differs by design', async (t) => {
  const url = (raw: string): string => new URL(raw, 'http://x').pathname;
  t.equal(url('/a//..'), '/a/', 'WHATWG: `..` pops the empty segment');
  t.equal(outcome('/a//..'), '/', 'we merge // first, as the services router drops empty segments');
  t.equal(url('/a/../..'), '/', 'WHATWG clamps `..` at the root');
  t.equal(outcome('/a/../..'), refused(ABOVE_ROOT), 'we refuse it');
  t.equal(url('/a\\b'), '/a/b', 'WHATWG reads \\ as /');
  t.equal(outcome('/a\\b'), refused(BACKSLASH), 'we refuse it');
  t.equal(new URL('//evil/a', 'http://x').host, 'evil', 'WHATWG reads a leading // as an authority');
  t.equal(outcome('//evil/a'), '/evil/a', 'we merge it into a path');
  t.equal(url('/%7e'), '/%7e', 'WHATWG keeps escapes as they are');
  t.equal(outcome('/%7e'), '/~', 'we decode unreserved ones');
  t.equal(url('/a"b'), '/a%22b', 'WHATWG escapes " < > ` { }');
  t.equal(outcome('/a"b'), '/a"b', 'we keep them (visible ASCII)');
});

// ---- The query ----

t.test('queryRefusal: visible ASCII passes, anything else is refused', async (t) => {
  let visible = '';
  for (let c = 0x21; c <= 0x7e; c++) visible += String.fromCharCode(c);
  t.equal(queryRefusal(visible), undefined, 'every visible ASCII character');
  t.equal(queryRefusal(''), undefined, 'empty');
  t.equal(queryRefusal('a=%20&b=%zz;c'), undefined, 'escapes are not checked: the query is forwarded byte for byte');
  for (const q of ['a=b c', 'a=\t', '\x00', 'a\x7f', 'q=caf\u00e9', '\u{1F600}']) {
    t.same(queryRefusal(q), { refused: true, detail: QUERY_NOT_VISIBLE }, `${JSON.stringify(q)} is refused`);
  }
  fc.assert(
    fc.property(fc.string({ unit: fc.oneof({ weight: 10, arbitrary: rawCharArb }, { weight: 1, arbitrary: fc.constant('?') }) }), (q) => {
      const visibleOnly = /^[\x21-\x7e]*$/.test(q);
      return (queryRefusal(q) === undefined) === visibleOnly;
    }),
    { numRuns: RUNS },
  );
});
