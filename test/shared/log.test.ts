// @tier: pure
import t from 'tap';
import { SignJWT } from 'jose';
import { createLogger, hashSubject, scrub } from '../../shared/log.js';

/** A logger whose every line is parsed and kept (pino writes synchronously to a plain object stream). */
function capture() {
  const raw: string[] = [];
  const destination = { write: (s: string) => void raw.push(s) };
  const log = createLogger({ service: 'test', level: 'trace', destination });
  return {
    log,
    raw,
    last: () => JSON.parse(raw.at(-1) ?? 'null') as Record<string, unknown> & { msg?: string },
  };
}

function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

const CARD = '4111111111111111';
const ORDER = '1234567812345678';

t.test('the fixtures are what they claim', async (t) => {
  t.equal(luhn(CARD), true, 'the card number passes Luhn');
  t.equal(luhn(ORDER), false, 'the order number does not');
});

t.test('request headers: Authorization, X-API-Key, Cookie are redacted', async (t) => {
  const { log, raw, last } = capture();
  log.info(
    {
      req: {
        method: 'GET',
        headers: {
          authorization: 'Bearer sekrit-1',
          'x-api-key': 'sekrit-2',
          cookie: 'sid=sekrit-3',
          'x-subject-secret': 'sekrit-4',
          accept: '*/*',
        },
      },
    },
    'request',
  );
  t.same(last().req, {
    method: 'GET',
    headers: {
      authorization: '[Redacted]',
      'x-api-key': '[Redacted]',
      cookie: '[Redacted]',
      'x-subject-secret': '[Redacted]',
      accept: '*/*',
    },
  });
  log.info({ headers: { Authorization: 'Basic c2Vrcml0LTU6eA==', 'X-API-Key': 'sekrit-6' } }, 'top-level headers');
  t.same(last().headers, { Authorization: '[Redacted]', 'X-API-Key': '[Redacted]' });
  t.notMatch(raw.join(''), /sekrit|c2Vrcml0/);
});

t.test('passwords, tokens and client secrets are redacted at the top level and nested', async (t) => {
  const { log, raw, last } = capture();
  log.info(
    {
      password: 'pw-1',
      user: { email: 'a@example.com', password: 'pw-2', new_password: 'pw-3' },
      body: { access_token: 'tok-1', refresh_token: 'tok-2', id_token: 'tok-3', token: 'tok-4', token_type: 'Bearer' },
      client: { client_id: 'app', client_secret: 'cs-1' },
      client_secret: 'cs-2',
      api_key: 'key-1',
    },
    'secrets',
  );
  const line = last();
  t.equal(line.password, '[Redacted]');
  t.same(line.user, { email: 'a@example.com', password: '[Redacted]', new_password: '[Redacted]' });
  t.same(line.body, {
    access_token: '[Redacted]',
    refresh_token: '[Redacted]',
    id_token: '[Redacted]',
    token: '[Redacted]',
    token_type: 'Bearer',
  });
  t.same(line.client, { client_id: 'app', client_secret: '[Redacted]' });
  t.equal(line.client_secret, '[Redacted]');
  t.equal(line.api_key, '[Redacted]');
  t.notMatch(raw.join(''), /pw-\d|tok-\d|cs-\d|key-1/);
});

t.test('card numbers in free text are masked; other long numbers are not', async (t) => {
  const { log, raw, last } = capture();
  log.info(`charged card ${CARD} for order ${ORDER}`);
  t.match(last().msg, /\[Redacted card\]/);
  t.match(last().msg, new RegExp(`order ${ORDER}$`), 'a non-Luhn 16-digit order number is left alone');
  log.info({ note: 'card 4111-1111-1111-1111 on file', order_id: ORDER }, 'in a field, with dashes');
  t.match(last().note, /^card \[Redacted card\]/);
  t.equal(last().order_id, ORDER);
  log.info('spaced 4111 1111 1111 1111');
  t.match(last().msg, /^spaced \[Redacted card\]/);
  t.notMatch(raw.join(''), /4111.?1111.?1111.?1111/);
});

t.test('masking a card keeps the space after it', async (t) => {
  t.equal(scrub(`card ${CARD} ok`), 'card [Redacted card] ok');
});

t.test('bearer tokens and JWTs inside messages are masked', async (t) => {
  const jwt = await new SignJWT({ sub: 'user-1', scope: 'orders' })
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' })
    .setIssuedAt()
    .sign(new TextEncoder().encode('a-test-signing-key-of-32-bytes!!'));
  const { log, raw, last } = capture();
  log.warn('upstream rejected Authorization: Bearer abc.DEF-123_xyz~+/= and moved on');
  t.equal(last().msg, 'upstream rejected Authorization: Bearer [Redacted] and moved on');
  log.warn(`token in query ?t=${jwt} end`);
  t.equal(last().msg, 'token in query ?t=[Redacted JWT] end');
  log.info({ detail: `bad token ${jwt}` }, 'in a field');
  t.equal(last().detail, 'bad token [Redacted JWT]');
  log.info('printf args %s', `Bearer ${jwt}`);
  t.equal(last().msg, 'printf args Bearer [Redacted]');
  t.notMatch(raw.join(''), new RegExp(jwt.split('.')[1]!));
  t.notMatch(raw.join(''), /abc\.DEF/);
});

t.test('errors: message and stack are scrubbed', async (t) => {
  const { log, raw, last } = capture();
  const err = Object.assign(new Error(`refused Bearer opaque-secret for card ${CARD}`), { code: 'E_TEST' });
  log.error({ err }, 'call failed');
  const e = last().err as { type: string; message: string; code: string; stack: string };
  t.equal(e.type, 'Error');
  t.equal(e.code, 'E_TEST');
  t.match(e.message, /^refused Bearer \[Redacted\] for card \[Redacted card\]/);
  t.match(e.stack, /^Error: refused Bearer \[Redacted\]/);
  log.error(new Error('first-arg Bearer opaque-2'), 'as the first argument');
  t.notMatch(raw.join(''), /opaque-secret|opaque-2|4111/);
});

t.test('credentials inside URLs are masked', async (t) => {
  const { log, raw } = capture();
  log.error({ err: new Error('pool exhausted: postgres://app:hunter2@db/app') }, 'failed');
  t.notMatch(raw.join(''), /hunter2/);
});

t.test('non-secret structure is kept', async (t) => {
  const { log, last } = capture();
  log.info({ at: new Date(0) }, 'a date');
  t.equal(last().at, '1970-01-01T00:00:00.000Z');
});

t.test('hashSubject: stable, short, not the input', async (t) => {
  const subject = 'key:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08';
  const h = hashSubject(subject);
  t.equal(hashSubject(subject), h, 'stable across calls');
  t.match(h, /^[0-9a-f]{16}$/);
  t.not(h, subject);
  t.notMatch(subject, h, 'no part of the input');
  t.not(hashSubject('user:1'), hashSubject('user:2'));
  // A fixed vector: traces from different services and releases must agree on a subject's tag.
  t.equal(hashSubject('user:1'), '78e4c2adaf20fa6d');
  const { log, raw } = capture();
  log.info({ subject: hashSubject('user:alice@example.com') }, 'admitted');
  t.notMatch(raw.join(''), /alice/);
});
