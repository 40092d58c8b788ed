// @tier: pure
/**
 * The pure template core: the `{{name}}` language (its digest section: digest.test.ts), locale
 * fallback chains, safe push truncation, SMS segment counting (GSM-7 160/153, UCS-2 70/67, escapes
 * and surrogate pairs never split), per-channel rendering, and the validation of template
 * definitions.
 */
import t from 'tap';
import fc from 'fast-check';
import { RenderError, TemplateSyntaxError } from '../../../notifier/templates/errors.js';
import { canonicalLocale, localeChain } from '../../../notifier/templates/locale.js';
import { escapeHtml, parseTemplate, substitute, variablesOf } from '../../../notifier/templates/syntax.js';
import { codePointLength, ELLIPSIS, truncateText } from '../../../notifier/templates/truncate.js';
import { isGsm7, smsSize } from '../../../notifier/templates/sms.js';
import { compileParts, PUSH_BODY_MAX, PUSH_TITLE_MAX, renderParts } from '../../../notifier/templates/render.js';
import { parseDefinition } from '../../../notifier/templates/definition.js';
import { parseTemplateId, parseVariantId } from '../../../notifier/templates/template-id.js';
import { PlatformError } from '../../../shared/errors.js';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const render = (src: string, data: Record<string, string>, escape?: (s: string) => string): string =>
  substitute(parseTemplate(src), data, { escape });

function renderFailure(fn: () => unknown): RenderError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RenderError) return err;
    throw err;
  }
  throw new Error('expected a RenderError');
}

t.test('{{name}} substitution', async (t) => {
  t.equal(render('Hello {{name}}!', { name: 'Ann' }), 'Hello Ann!');
  t.equal(render('{{ name }} and {{\tname\t}}', { name: 'x' }), 'x and x', 'spaces and tabs inside the braces');
  t.equal(render('{{a}}{{b.c}}{{d-e}}{{_f}}{{9}}', { a: '1', 'b.c': '2', 'd-e': '3', _f: '4', '9': '5' }), '12345');
  t.equal(render('no tags }} here', {}), 'no tags }} here', 'a lone }} is text');
  t.equal(render('', {}), '');
  t.same(variablesOf(parseTemplate('{{a}} {{b}} {{a}}')), ['a', 'b']);
  t.equal(render('{{x}}', { x: '{{y}}', y: 'leak' }), '{{y}}', 'a substituted value is never parsed again');
  t.equal(render('{{v}}', { v: '${process.exit()}' }), '${process.exit()}', 'values are inert text');
});

t.test('a missing variable is a RenderError naming it', async (t) => {
  const e = renderFailure(() => render('Code {{code}} for {{name}}', { name: 'Ann' }));
  t.equal(e.code, 'template_render_failed');
  t.equal(e.status, 422);
  t.equal(e.reason, 'missing_variable');
  t.equal(e.variable, 'code');
  t.equal(e.detail, 'template_data has no value for {{code}}');
});

t.test('only own properties of template_data are variables (no prototype lookups)', async (t) => {
  for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
    t.equal(renderFailure(() => render(`{{${name}}}`, {})).reason, 'missing_variable', name);
  }
  const data = JSON.parse('{"__proto__": "own"}') as Record<string, string>;
  t.equal(render('{{__proto__}}', data), 'own', 'an own __proto__ key is an ordinary variable');
});

t.test('a non-string value is invalid_variable', async (t) => {
  const e = renderFailure(() => render('{{n}}', { n: 5 } as unknown as Record<string, string>));
  t.equal(e.reason, 'invalid_variable');
  t.equal(e.variable, 'n');
});

t.test('syntax errors: only {{name}} and {{#items}}, nothing else', async (t) => {
  const other = (i: number): string =>
    `{{ at character ${i} must be {{name}} (letters, digits, _ . -), {{#items}} or {{/items}}; no other syntax is supported`;
  const cases: [string, string, number][] = [
    ['Hi {{name', 'unclosed {{ at character 3', 3],
    ['{{}}', other(0), 0],
    ['{{ }}', other(0), 0],
    ['x {{{name}}}', other(2), 2],
    ['{{#each items}}', other(0), 0],
    ['ok {{a}} {{name()}}', other(9), 9],
    ['{{a b}}', other(0), 0],
    ['{{-a}}', other(0), 0],
    [`{{${'a'.repeat(65)}}}`, 'variable name at character 0 is longer than 64', 0],
  ];
  for (const [src, message, index] of cases) {
    t.throws(() => parseTemplate(src), { name: 'TemplateSyntaxError', message, index }, JSON.stringify(src));
  }
  t.ok(new TemplateSyntaxError('m', 1) instanceof Error);
});

t.test('HTML escaping', async (t) => {
  t.equal(escapeHtml(`<a href="x">'&'</a>`), '&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
  t.equal(render('<b>{{v}}</b>', { v: '<script>alert(1)</script>' }, escapeHtml), '<b>&lt;script&gt;alert(1)&lt;/script&gt;</b>');
});

t.test('template ids and variant ids', async (t) => {
  t.same(parseTemplateId('order_shipped_v2'), { id: 'order_shipped_v2', name: 'order_shipped', version: 2 });
  t.same(parseTemplateId('a_v10'), { id: 'a_v10', name: 'a', version: 10 });
  for (const bad of [
    'order_shipped',
    'order_shipped_v0',
    'order_shipped_v01',
    'Order_v1',
    '_v1',
    'a.b_v1',
    'a_v1.en',
    '1a_v1',
    'a_v',
    `${'a'.repeat(130)}_v1`,
  ]) {
    t.equal(parseTemplateId(bad), undefined, bad);
  }
  t.same(parseVariantId('order_shipped_v2.fr-ca'), {
    template: { id: 'order_shipped_v2', name: 'order_shipped', version: 2 },
    locale: 'fr_CA',
  });
  t.equal(parseVariantId('order_shipped_v2'), undefined);
  t.equal(parseVariantId('order_shipped_v2.french'), undefined);
});

t.test('locales and the fallback chain xx_YY → xx → default', async (t) => {
  t.equal(canonicalLocale('en'), 'en');
  t.equal(canonicalLocale('en-us'), 'en_US');
  t.equal(canonicalLocale('EN_us'), 'en_US');
  t.equal(canonicalLocale('es-419'), 'es_419');
  t.equal(canonicalLocale('fil_PH'), 'fil_PH');
  for (const bad of ['', 'e', 'english', 'en_USA', 'en-', 'zh-Hant-TW', 'en US', 'en_1']) t.equal(canonicalLocale(bad), undefined, bad);
  t.same(localeChain('fr_CA', 'en'), ['fr_CA', 'fr', 'en']);
  t.same(localeChain('fr-ca', 'en'), ['fr_CA', 'fr', 'en']);
  t.same(localeChain('fr', 'en'), ['fr', 'en']);
  t.same(localeChain('en_GB', 'en'), ['en_GB', 'en'], 'no duplicate of the default');
  t.same(localeChain('en', 'en'), ['en']);
  t.same(localeChain(undefined, 'de'), ['de']);
  t.same(localeChain('not a locale', 'de'), ['de'], 'an unusable locale is as good as none');
});

t.test('push truncation: code points, whole graphemes, an ellipsis', async (t) => {
  t.equal(truncateText('short', 178), 'short');
  const exact = 'x'.repeat(178);
  t.equal(truncateText(exact, 178), exact, 'exactly the limit is untouched');
  const cut = truncateText('y'.repeat(300), 178);
  t.equal(codePointLength(cut), 178);
  t.ok(cut.endsWith(ELLIPSIS));
  t.equal(cut, 'y'.repeat(177) + ELLIPSIS);

  const emoji = truncateText('😀'.repeat(200), 178);
  t.equal(codePointLength(emoji), 178, 'counted in code points, not UTF-16 units');
  t.notMatch(emoji, LONE_SURROGATE, 'no lone surrogate');
  t.equal(emoji, '😀'.repeat(177) + ELLIPSIS);
  t.equal(truncateText('😀'.repeat(178), 178), '😀'.repeat(178), '178 emoji (356 UTF-16 units) fit');

  const family = '👨\u200d👩\u200d👧'; // 5 code points, one grapheme
  const withFamily = truncateText('a'.repeat(175) + family + 'b', 178);
  t.equal(withFamily, 'a'.repeat(175) + ELLIPSIS, 'a ZWJ sequence is kept whole or dropped whole');
  const accents = truncateText('e\u0301'.repeat(100), 11);
  t.equal(accents, 'e\u0301'.repeat(5) + ELLIPSIS, 'a letter keeps its combining accent');
  t.equal(truncateText('word '.repeat(60), 20), 'word word word word' + ELLIPSIS, 'no space before the ellipsis');
  t.equal(codePointLength(truncateText('e' + '\u0301'.repeat(50), 10)), 10, 'one huge grapheme is cut by code point');
});

t.test('SMS segments: GSM-7 is 160 in one message, 153 per segment', async (t) => {
  t.same(smsSize('a'.repeat(160)), { encoding: 'gsm7', units: 160, segments: 1 });
  t.same(smsSize('a'.repeat(161)), { encoding: 'gsm7', units: 161, segments: 2 });
  t.same(smsSize('a'.repeat(306)), { encoding: 'gsm7', units: 306, segments: 2 });
  t.same(smsSize('a'.repeat(307)), { encoding: 'gsm7', units: 307, segments: 3 });
  // The whole default alphabet (127 characters: 128 less the escape) is one septet each.
  const alphabet =
    '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?' +
    '¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
  t.equal(Array.from(alphabet).length, 127);
  t.same(smsSize(alphabet), { encoding: 'gsm7', units: 127, segments: 1 });
  t.same(smsSize(''), { encoding: 'gsm7', units: 0, segments: 1 });
});

t.test('SMS segments: extension characters take two septets, and an escape pair is never split', async (t) => {
  t.same(smsSize('€'.repeat(80)), { encoding: 'gsm7', units: 160, segments: 1 });
  t.same(smsSize('€'.repeat(81)), { encoding: 'gsm7', units: 162, segments: 2 });
  t.same(smsSize('^{}\\[~]|\f'), { encoding: 'gsm7', units: 18, segments: 1 });
  // 152 septets, then a 2-septet € that would straddle the 153rd: it starts segment 2.
  const straddle = 'a'.repeat(152) + '€' + 'a'.repeat(152);
  t.same(smsSize(straddle), { encoding: 'gsm7', units: 306, segments: 3 }, '306 septets, yet 3 segments');
  t.same(smsSize('a'.repeat(151) + '€' + 'a'.repeat(153)), { encoding: 'gsm7', units: 306, segments: 2 }, 'the pair fits: 2');
});

t.test('SMS segments: any character outside GSM-7 makes it UCS-2, 70 then 67', async (t) => {
  t.same(smsSize('ж'.repeat(70)), { encoding: 'ucs2', units: 70, segments: 1 });
  t.same(smsSize('ж'.repeat(71)), { encoding: 'ucs2', units: 71, segments: 2 });
  t.same(smsSize('ж'.repeat(134)), { encoding: 'ucs2', units: 134, segments: 2 });
  t.same(smsSize('ж'.repeat(135)), { encoding: 'ucs2', units: 135, segments: 3 });
  t.equal(smsSize('a'.repeat(100) + '’').encoding, 'ucs2', 'one curly quote switches the whole text');
  t.same(smsSize('a'.repeat(100) + '’'), { encoding: 'ucs2', units: 101, segments: 2 });
  t.equal(smsSize('price `5`').encoding, 'ucs2', 'a backtick is not GSM-7');
  t.same(smsSize('😀'.repeat(35)), { encoding: 'ucs2', units: 70, segments: 1 }, 'an emoji is two UTF-16 units');
  // 66 units, then a surrogate pair that would straddle the 67th: it starts segment 2.
  t.same(smsSize('ж'.repeat(66) + '😀' + 'ж'.repeat(66)), { encoding: 'ucs2', units: 134, segments: 3 });
  t.same(smsSize('ж'.repeat(65) + '😀' + 'ж'.repeat(67)), { encoding: 'ucs2', units: 134, segments: 2 });
  t.notOk(isGsm7('ç'), 'only the capital Ç is in the default alphabet');
});

t.test('SMS segments: bounds hold for any text', async (t) => {
  const gsmChars = Array.from('@£$¥èéabcXYZ 019.,!?\n€^{}[]~|\\');
  const anyChars = [...gsmChars, 'ж', '’', '😀', '👨\u200d👩'];
  const prop = (alphabet: string[]): void =>
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...alphabet), { maxLength: 700 }), (chars) => {
        const s = smsSize(chars.join(''));
        const [single, seg] = s.encoding === 'gsm7' ? [160, 153] : [70, 67];
        if (s.units <= single) return s.segments === 1;
        // Never fewer than a perfect packing, never more than one unit lost per segment.
        return s.segments >= Math.ceil(s.units / seg) && s.segments <= Math.ceil(s.units / (seg - 1));
      }),
      { numRuns: 300 },
    );
  prop(gsmChars);
  prop(anyChars);
  t.pass('properties held');
});

const PARTS = compileParts({
  push: { title: 'Order {{order_id}} for {{name}}', body: '{{msg}}' },
  email: { subject: 'Hi {{name}}', text: 'Dear {{name}},\n{{msg}}', html: '<p>Dear {{name}},</p><p>{{msg}}</p>' },
  sms: { body: 'Code: {{code}}' },
  in_app: { title: '{{name}}', body: '{{msg}}' },
});

t.test('push: title and body cut to their limits', async (t) => {
  const r = renderParts(PARTS, 'push', { order_id: '1', name: 'n'.repeat(100), msg: 'm'.repeat(500) });
  t.equal(codePointLength(r.body), PUSH_BODY_MAX);
  t.equal(codePointLength(r.title!), PUSH_TITLE_MAX);
  t.ok(r.body.endsWith(ELLIPSIS) && r.title!.endsWith(ELLIPSIS));
  t.same(renderParts(PARTS, 'push', { order_id: '7', name: 'Ann', msg: 'Shipped' }), {
    channel: 'push',
    title: 'Order 7 for Ann',
    body: 'Shipped',
  });
  t.equal(renderFailure(() => renderParts(PARTS, 'push', { order_id: '7', name: 'Ann', msg: '  ' })).reason, 'empty_output');
});

t.test('email: values HTML-escaped in the HTML part only; the subject stays one line', async (t) => {
  const r = renderParts(PARTS, 'email', { name: 'Tom & <Jerry>\r\nBcc: x@evil.test', msg: '<img src=x onerror=alert(1)>' });
  t.equal(r.subject, 'Hi Tom & <Jerry> Bcc: x@evil.test', 'line breaks in a value become a space');
  t.equal(r.text, 'Dear Tom & <Jerry>\r\nBcc: x@evil.test,\n<img src=x onerror=alert(1)>', 'plain text as given');
  t.equal(r.body, r.text);
  t.equal(r.html, '<p>Dear Tom &amp; &lt;Jerry&gt;\r\nBcc: x@evil.test,</p><p>&lt;img src=x onerror=alert(1)&gt;</p>');
  const noHtml = compileParts({ email: { subject: 's', text: 'a < b\nline 2' } });
  t.equal(renderParts(noHtml, 'email', {}).html, 'a &lt; b<br>\nline 2', 'HTML made from the text when the template has none');
});

t.test('sms: plain text with its segment count; too long is an error', async (t) => {
  t.same(renderParts(PARTS, 'sms', { code: '123456' }), { channel: 'sms', body: 'Code: 123456', segments: 1, encoding: 'gsm7' });
  t.same(renderParts(PARTS, 'sms', { code: 'ж'.repeat(80) }).segments, 2);
  const long = renderFailure(() => renderParts(PARTS, 'sms', { code: 'x'.repeat(153 * 10) }));
  t.equal(long.reason, 'sms_too_long');
  t.equal(renderParts(PARTS, 'sms', { code: 'x'.repeat(153 * 10 - 6) }).segments, 10, 'ten segments are allowed');
  t.equal(renderFailure(() => renderParts(compileParts({ sms: { body: '{{x}}' } }), 'sms', { x: '' })).reason, 'empty_output');
});

t.test('in_app: title and body as written; a channel the template lacks is channel_missing', async (t) => {
  t.same(renderParts(PARTS, 'in_app', { name: 'N', msg: 'x'.repeat(400) }), { channel: 'in_app', title: 'N', body: 'x'.repeat(400) });
  const e = renderFailure(() => renderParts(compileParts({ sms: { body: 'x' } }), 'push', {}));
  t.equal(e.reason, 'channel_missing');
  t.equal(e.extra?.['channel'], 'push');
});

function definitionError(body: unknown): { field: string | undefined; detail: string | undefined } {
  try {
    parseDefinition(body as Record<string, unknown>);
  } catch (err) {
    if (err instanceof PlatformError && err.code === 'invalid_field') return { field: err.field, detail: err.detail };
    throw err;
  }
  throw new Error('expected invalid_field');
}

t.test('template definitions: valid ones are canonicalised', async (t) => {
  const def = parseDefinition({
    default_locale: 'EN',
    description: null,
    variants: {
      en: { push: { body: 'Hi {{name}}' }, sms: { body: 'Hi' } },
      'fr-ca': { push: { title: 'Salut', body: 'Salut {{name}}' }, sms: { body: 'Salut' } },
    },
  });
  t.same(def, {
    defaultLocale: 'en',
    variants: {
      en: { push: { body: 'Hi {{name}}' }, sms: { body: 'Hi' } },
      fr_CA: { push: { title: 'Salut', body: 'Salut {{name}}' }, sms: { body: 'Salut' } },
    },
  });
});

t.test('template definitions: each fault names its field', async (t) => {
  const ok = { push: { body: 'x' } };
  const cases: [unknown, string, string][] = [
    [{ variants: { en: ok } }, 'default_locale', 'default_locale: is required'],
    [{ default_locale: 'english', variants: { en: ok } }, 'default_locale', 'default_locale: must be a locale: xx or xx_YY'],
    [{ default_locale: 'en' }, 'variants', 'variants: is required'],
    [{ default_locale: 'en', variants: [] }, 'variants', 'variants: must be an object keyed by locale'],
    [{ default_locale: 'en', variants: {} }, 'variants', 'variants: needs at least the default locale'],
    [{ default_locale: 'en', variants: { fr: ok } }, 'variants', 'variants: must include the default locale en'],
    [{ default_locale: 'en', variants: { en: ok, french: ok } }, 'variants.french', 'variants.french: is not a locale: xx or xx_YY'],
    [
      { default_locale: 'en', variants: { en: ok, en_US: ok, 'en-us': ok } },
      'variants.en-us',
      'variants.en-us: is the same locale as variants.en_US',
    ],
    [
      { default_locale: 'en', variants: { en: {} } },
      'variants.en',
      'variants.en: needs at least one channel part (push, email, sms, in_app)',
    ],
    [
      { default_locale: 'en', variants: { en: { fax: { body: 'x' } } } },
      'variants.en.fax',
      'variants.en.fax: unknown channel; one of push, email, sms, in_app',
    ],
    [{ default_locale: 'en', variants: { en: { push: {} } } }, 'variants.en.push.body', 'variants.en.push.body: is required'],
    [
      { default_locale: 'en', variants: { en: { push: { body: '  ' } } } },
      'variants.en.push.body',
      'variants.en.push.body: must not be empty',
    ],
    [{ default_locale: 'en', variants: { en: { push: { body: 5 } } } }, 'variants.en.push.body', 'variants.en.push.body: must be a string'],
    [
      { default_locale: 'en', variants: { en: { push: { body: 'x', subject: 'y' } } } },
      'variants.en.push.subject',
      'variants.en.push.subject: unknown field; push takes title, body',
    ],
    [
      { default_locale: 'en', variants: { en: { email: { subject: 's' } } } },
      'variants.en.email.text',
      'variants.en.email.text: is required',
    ],
    [
      { default_locale: 'en', variants: { en: { sms: { body: 'Code {{code' } } } },
      'variants.en.sms.body',
      'variants.en.sms.body: unclosed {{ at character 5',
    ],
    [
      { default_locale: 'en', variants: { en: ok, fr: { sms: { body: 'x' } } } },
      'variants.fr.push',
      'variants.fr.push: is required: every variant has the channels of the default locale en',
    ],
    [
      { default_locale: 'en', variants: { en: ok, fr: { push: { body: 'x' }, sms: { body: 'x' } } } },
      'variants.fr.sms',
      'variants.fr.sms: the default locale en has no sms part; every variant has the same channels',
    ],
    [{ default_locale: 'en', variants: { en: ok }, owner: 'me' }, 'owner', 'owner: unknown field'],
    [
      { default_locale: 'en', variants: { en: { push: { body: 'x'.repeat(8001) } } } },
      'variants.en.push.body',
      'variants.en.push.body: must be at most 8000 characters',
    ],
  ];
  for (const [body, field, detail] of cases) {
    t.same(definitionError(body), { field, detail }, detail);
  }
});
