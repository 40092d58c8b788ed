// @tier: pure
/**
 * The digest section `{{#items}}…{{/items}}` and `{{count}}`: how it parses (and every way it
 * fails to, with the offset), how a digest renders (items in order, the top level from the last
 * item, count beyond the items shown), what a non-digest render of a digest template does, and
 * that escaping, truncation and SMS limits still apply to the final text.
 */
import t from 'tap';
import fc from 'fast-check';
import { RenderError } from '../../../notifier/templates/errors.js';
import {
  digestData,
  escapeHtml,
  itemVariablesOf,
  parseTemplate,
  substitute,
  variablesOf,
  type TemplateData,
} from '../../../notifier/templates/syntax.js';
import { compileParts, PUSH_BODY_MAX, renderParts } from '../../../notifier/templates/render.js';
import { codePointLength, ELLIPSIS } from '../../../notifier/templates/truncate.js';
import { parseDefinition } from '../../../notifier/templates/definition.js';
import { PlatformError } from '../../../shared/errors.js';

/** A digest render of one template source, as renderParts does it. */
const digest = (src: string, items: TemplateData[], count?: number, data: TemplateData = {}): string =>
  substitute(parseTemplate(src), digestData(data, items, count), { items });

function renderFailure(fn: () => unknown): RenderError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RenderError) return err;
    throw err;
  }
  throw new Error('expected a RenderError');
}

const LIKES = '{{count}} new: {{#items}}{{actor}} liked {{post}}. {{/items}}';
const ANN = { actor: 'Ann', post: 'Pics' };
const BOB = { actor: 'Bob', post: 'Cats' };
const CY = { actor: 'Cy', post: 'Dogs' };

t.test('a section parses into its body; spaces and tabs as in {{name}}', async (t) => {
  t.same(parseTemplate(LIKES), [
    { name: 'count' },
    ' new: ',
    { section: 'items', body: [{ name: 'actor' }, ' liked ', { name: 'post' }, '. '] },
  ]);
  const spaced = [{ section: 'items', body: ['x'] }];
  t.same(parseTemplate('{{# items }}x{{/ items }}'), spaced);
  t.same(parseTemplate('{{ #items }}x{{ /items\t}}'), spaced);
  t.same(parseTemplate('{{\t#\titems}}x{{/items}}'), spaced);
  t.same(parseTemplate('{{#items}}{{/items}}'), [{ section: 'items', body: [] }], 'an empty section');
  t.same(
    parseTemplate('{{#items}}a{{/items}}-{{#items}}b{{/items}}'),
    [{ section: 'items', body: ['a'] }, '-', { section: 'items', body: ['b'] }],
    'two sections one after the other',
  );
});

t.test('syntax errors in sections name the offending tag and its offset', async (t) => {
  const other = (i: number): string =>
    `{{ at character ${i} must be {{name}} (letters, digits, _ . -), {{#items}} or {{/items}}; no other syntax is supported`;
  const cases: [string, string, number][] = [
    ['{{#each}}x{{/each}}', '{{#each}} at character 0: the only section is {{#items}}…{{/items}}', 0],
    ['Hi {{#item}}x{{/item}}', '{{#item}} at character 3: the only section is {{#items}}…{{/items}}', 3],
    ['{{#Items}}x{{/Items}}', '{{#Items}} at character 0: the only section is {{#items}}…{{/items}}', 0],
    ['{{#items}}x{{/item}}', '{{/item}} at character 11: the only section is {{#items}}…{{/items}}', 11],
    ['a {{/each}}', '{{/each}} at character 2: the only section is {{#items}}…{{/items}}', 2],
    [
      '{{#items}}a{{#items}}b{{/items}}{{/items}}',
      '{{#items}} at character 11 is inside the {{#items}} opened at character 0; sections do not nest',
      11,
    ],
    ['x {{#items}}abc', '{{#items}} at character 2 is never closed with {{/items}}', 2],
    ['{{#items}}\n', '{{#items}} at character 0 is never closed with {{/items}}', 0],
    ['{{/items}}', '{{/items}} at character 0 closes no {{#items}}', 0],
    ['ab {{/items}}{{#items}}', '{{/items}} at character 3 closes no {{#items}}', 3],
    ['{{#items}}a{{/items}} b {{/items}}', '{{/items}} at character 24 closes no {{#items}}', 24],
    ['{{#}}', other(0), 0],
    ['{{# }}', other(0), 0],
    ['{{/}}', other(0), 0],
    ['{{#items x}}', other(0), 0],
    ['{{# #items}}', other(0), 0],
    ['{{^items}}x{{/items}}', other(0), 0],
    ['{{#each items}}x{{/each}}', other(0), 0],
    ['{{{#items}}}', other(0), 0],
    ['{{#items}', 'unclosed {{ at character 0', 0],
    ['{{#items}}{{actor', 'unclosed {{ at character 10', 10],
  ];
  for (const [src, message, index] of cases) {
    t.throws(() => parseTemplate(src), { name: 'TemplateSyntaxError', message, index }, JSON.stringify(src));
  }
});

t.test('a malformed section is refused when the template is saved, naming the field', async (t) => {
  try {
    parseDefinition({ default_locale: 'en', variants: { en: { push: { body: 'New: {{#items}}{{actor}}' } } } });
    t.fail('expected invalid_field');
  } catch (err) {
    t.type(err, PlatformError);
    t.equal((err as PlatformError).field, 'variants.en.push.body');
    t.equal((err as PlatformError).detail, 'variants.en.push.body: {{#items}} at character 5 is never closed with {{/items}}');
  }
  const def = parseDefinition({ default_locale: 'en', variants: { en: { push: { body: LIKES } } } });
  t.equal(def.variants['en']!.push!.body, LIKES, 'a well-formed digest template is accepted as written');
});

t.test('variablesOf is the top level; itemVariablesOf what each item must have', async (t) => {
  const pieces = parseTemplate('{{count}} {{#items}}{{actor}} {{post}} {{actor}}{{/items}} {{actor}} {{site}}');
  t.same(variablesOf(pieces), ['count', 'actor', 'site']);
  t.same(itemVariablesOf(pieces), ['actor', 'post']);
  t.same(itemVariablesOf(parseTemplate('{{a}}')), [], 'none without a section');
  t.same(variablesOf(parseTemplate('{{#items}}{{x}}{{/items}}')), [], 'a name used only in the section is not top-level');
});

t.test('0, 1 and many items: the body once per item, in order', async (t) => {
  t.equal(digest(LIKES, []), '0 new: ');
  t.equal(digest(LIKES, [ANN]), '1 new: Ann liked Pics. ');
  t.equal(digest(LIKES, [ANN, BOB, CY]), '3 new: Ann liked Pics. Bob liked Cats. Cy liked Dogs. ');
  t.equal(digest('[{{#items}}{{/items}}]', [ANN, BOB]), '[]', 'an empty section renders nothing');
  t.equal(digest('{{#items}}{{actor}}{{/items}}|{{#items}}{{post}}{{/items}}', [ANN, BOB]), 'AnnBob|PicsCats');
});

t.test('count: the digest’s size, which may exceed the items rendered', async (t) => {
  t.equal(digest(LIKES, [ANN, BOB], 12), '12 new: Ann liked Pics. Bob liked Cats. ');
  t.equal(digest('{{count}}', [], 4), '4', 'a count with no items shown');
  t.equal(digest('{{count}}', [{ count: 'item' }, { count: 'last' }], 7), '7', 'count overrides an item key called count');
  t.equal(digest('{{count}}', [], undefined, { count: 'data' }), '0', 'and a data key called count');
  for (const bad of [1, 2.5, Number.NaN, -1, Number.POSITIVE_INFINITY]) {
    t.throws(() => digestData({}, [ANN, BOB], bad), RangeError, `count ${bad}`);
  }
});

t.test('the top level reads the last item, over data; the section reads its item only', async (t) => {
  t.equal(digest('{{actor}} and others: {{count}}', [ANN, BOB, CY]), 'Cy and others: 3', 'the most recent item');
  const data = { actor: 'Data', site: 'example.test' };
  t.equal(digest('{{actor}} on {{site}}', [ANN, BOB], undefined, data), 'Bob on example.test', 'data fills in what the item lacks');
  t.equal(digest('{{site}}', [], undefined, data), 'example.test', 'with no items, the data alone');
  t.equal(renderFailure(() => digest('{{actor}}', [])).variable, 'actor', 'no items, no data: a missing variable');

  const inItem = renderFailure(() => digest('{{#items}}{{site}}{{/items}}', [ANN], undefined, data));
  t.equal(inItem.reason, 'missing_variable', 'data is not visible inside the section');
  t.equal(inItem.variable, 'site');
  t.equal(inItem.detail, 'items[0] has no value for {{site}}');
  const count = renderFailure(() => digest('{{#items}}{{count}}{{/items}}', [ANN], 5));
  t.equal(count.variable, 'count', 'nor is count: inside, it is the item’s own key');
  t.equal(digest('{{#items}}{{count}}{{/items}}', [{ count: 'x' }], 5), 'x');
});

t.test('a variable missing from one item is a RenderError naming it and the item', async (t) => {
  const e = renderFailure(() => digest(LIKES, [ANN, { actor: 'Bob' }, CY]));
  t.equal(e.code, 'template_render_failed');
  t.equal(e.reason, 'missing_variable');
  t.equal(e.variable, 'post');
  t.equal(e.detail, 'items[1] has no value for {{post}}');
  t.same(e.extra, { reason: 'missing_variable', variable: 'post' });
  const bad = renderFailure(() => digest(LIKES, [{ actor: 'Ann', post: 5 } as unknown as TemplateData]));
  t.equal(bad.reason, 'invalid_variable');
  t.equal(bad.variable, 'post');
  t.equal(bad.detail, 'items[0].post must be a string');
  t.equal(renderFailure(() => digest('{{#items}}{{constructor}}{{/items}}', [ANN])).reason, 'missing_variable', 'own keys only');
});

t.test('outside a digest: {{#items}} is a missing variable, {{count}} an ordinary one', async (t) => {
  for (const data of [{}, { items: 'not a list' }] as TemplateData[]) {
    const e = renderFailure(() => substitute(parseTemplate(LIKES), { count: '2', ...data }));
    t.equal(e.reason, 'missing_variable', JSON.stringify(data));
    t.equal(e.variable, 'items');
    t.equal(e.detail, 'the template repeats {{#items}}, which only a digest render has');
  }
  t.equal(substitute(parseTemplate('{{count}} left'), { count: '3' }), '3 left');
  t.equal(renderFailure(() => substitute(parseTemplate('{{count}} left'), {})).variable, 'count');
  t.equal(substitute(parseTemplate('{{items}}'), { items: 'x' }), 'x', '{{items}} without # is an ordinary variable');
});

t.test('values are never parsed again, inside a section or out', async (t) => {
  const sneaky = { actor: '{{#items}}{{post}}{{/items}}', post: '{{count}}' };
  t.equal(digest(LIKES, [sneaky]), '1 new: {{#items}}{{post}}{{/items}} liked {{count}}. ');
  t.equal(digest('{{actor}}', [sneaky]), '{{#items}}{{post}}{{/items}}');
  fc.assert(
    fc.property(fc.array(fc.record({ v: fc.string() }), { maxLength: 20 }), fc.nat({ max: 50 }), (items, extra) => {
      const count = items.length + extra;
      const expected = `${count}:` + items.map((i) => `[${escapeHtml(i.v)}]`).join('');
      const got = substitute(parseTemplate('{{count}}:{{#items}}[{{v}}]{{/items}}'), digestData({}, items, count), {
        items,
        escape: escapeHtml,
      });
      return got === expected;
    }),
    { numRuns: 300 },
  );
  t.pass('a digest is the concatenation of each item’s escaped body');
});

t.test('a section tag alone on its line takes the line with it', async (t) => {
  const list = 'Your likes:\n{{#items}}\n- {{actor}}\n{{/items}}\nBye';
  t.equal(digest(list, [ANN, BOB]), 'Your likes:\n- Ann\n- Bob\nBye');
  t.equal(digest(list, []), 'Your likes:\nBye');
  t.equal(digest('Hi\r\n  {{#items}}\t\r\n* {{actor}}\r\n\t{{/items}}  \r\nBye', [ANN]), 'Hi\r\n* Ann\r\nBye', 'CRLF and indentation');
  t.equal(digest('x\n{{#items}}{{actor}}\n{{/items}}', [ANN, BOB]), 'x\nAnn\nBob\n', 'at the end of the template');
  t.equal(digest('{{#items}}\n{{actor}},{{/items}}', [ANN, BOB]), 'Ann,Bob,', 'at the start of the template');
  t.equal(digest('a {{#items}}{{actor}} {{/items}} b', [ANN]), 'a Ann  b', 'not alone: the spaces stay');
  t.equal(digest('a\n {{#items}}{{actor}}\n{{/items}}', [ANN]), 'a\n Ann\n', 'followed by a tag: not alone');
  t.equal(digest('a\n{{actor}}\n', [ANN]), 'a\nAnn\n', 'a variable alone on its line keeps it');
});

const DIGEST = compileParts({
  push: { title: '{{actor}} and others: {{count}} likes', body: LIKES },
  email: {
    subject: '{{count}} new: {{#items}}{{actor}}; {{/items}}',
    text: '{{#items}}\n{{actor}} liked {{post}}\n{{/items}}',
    html: '<ul>{{#items}}<li>{{actor}} liked {{post}}</li>{{/items}}</ul>',
  },
  sms: { body: LIKES },
  in_app: { body: '{{#items}}{{actor}} {{/items}}' },
});

t.test('renderParts: a digest push', async (t) => {
  t.same(renderParts(DIGEST, 'push', {}, { items: [ANN, BOB], count: 5 }), {
    channel: 'push',
    title: 'Bob and others: 5 likes',
    body: '5 new: Ann liked Pics. Bob liked Cats. ',
  });
  t.same(
    renderParts(DIGEST, 'push', { actor: 'Data' }, { items: [ANN] }),
    { channel: 'push', title: 'Ann and others: 1 likes', body: '1 new: Ann liked Pics. ' },
    'count defaults to the items; the item wins over data',
  );
  const many = Array.from({ length: 40 }, (_, k) => ({ actor: `user${k}`, post: `post${k}` }));
  const r = renderParts(DIGEST, 'push', {}, { items: many });
  t.equal(codePointLength(r.body), PUSH_BODY_MAX, 'the whole rendered body is truncated');
  t.ok(r.body.startsWith('40 new: user0 liked post0. ') && r.body.endsWith(ELLIPSIS));
  const empty = renderFailure(() => renderParts(compileParts({ push: { body: '{{#items}}{{a}}{{/items}}' } }), 'push', {}, { items: [] }));
  t.equal(empty.reason, 'empty_output', 'no items and nothing else: an empty push');
  const plain = renderFailure(() => renderParts(DIGEST, 'push', { actor: 'a', count: '1' }));
  t.equal(plain.reason, 'missing_variable', 'not a digest render');
  t.equal(plain.variable, 'items');
  t.throws(() => renderParts(DIGEST, 'push', {}, { items: [ANN, BOB], count: 1 }), RangeError);
});

t.test('renderParts: a digest email escapes every value in HTML, never the markup; the subject is one line', async (t) => {
  const evil = { actor: '<img src=x onerror=alert(1)>', post: 'Tom & "Jerry"' };
  const multi = { actor: 'A\r\nBcc: x@evil.test', post: 'p' };
  const r = renderParts(DIGEST, 'email', {}, { items: [evil, multi] });
  t.equal(
    r.html,
    '<ul><li>&lt;img src=x onerror=alert(1)&gt; liked Tom &amp; &quot;Jerry&quot;</li><li>A\r\nBcc: x@evil.test liked p</li></ul>',
  );
  t.equal(r.text, '<img src=x onerror=alert(1)> liked Tom & "Jerry"\nA\r\nBcc: x@evil.test liked p\n', 'plain text as given');
  t.equal(r.subject, '2 new: <img src=x onerror=alert(1)>; A Bcc: x@evil.test; ', 'line breaks in values become spaces');
  const noHtml = compileParts({ email: { subject: 's', text: '{{#items}}<{{actor}}>\n{{/items}}' } });
  t.equal(renderParts(noHtml, 'email', {}, { items: [ANN, BOB] }).html, '&lt;Ann&gt;<br>\n&lt;Bob&gt;<br>\n', 'HTML made from the text');
});

t.test('renderParts: a digest SMS is sized as a whole; too many items is sms_too_long', async (t) => {
  t.same(renderParts(DIGEST, 'sms', {}, { items: [ANN, BOB] }), {
    channel: 'sms',
    body: '2 new: Ann liked Pics. Bob liked Cats. ',
    segments: 1,
    encoding: 'gsm7',
  });
  const items = Array.from({ length: 80 }, (_, k) => ({ actor: `user${k}`, post: 'a post with a long name' }));
  t.equal(renderFailure(() => renderParts(DIGEST, 'sms', {}, { items })).reason, 'sms_too_long');
  t.same(renderParts(DIGEST, 'in_app', {}, { items: [ANN, BOB] }), { channel: 'in_app', body: 'Ann Bob ' });
});
