/**
 * The functions the notifier calls, against real PostgreSQL: renderTemplate's locale fallback
 * (xx_YY → xx → default, only for a missing variant), a render error that never falls back to
 * another locale, TemplateNotFoundError, templateExists, and markTemplateUsed freezing a version,
 * including against a concurrent replacement and a rolled-back mark; and one digest render.
 */
import t from 'tap';
import { migrate } from '../../../shared/migrate.js';
import { migrationsDir } from '../../../shared/paths.js';
import { PlatformError } from '../../../shared/errors.js';
import {
  markTemplateUsed,
  renderTemplate,
  RenderError,
  templateExists,
  TemplateNotFoundError,
  type Rendered,
} from '../../../notifier/templates/index.js';
import { parseDefinition } from '../../../notifier/templates/definition.js';
import { putTemplate } from '../../../notifier/templates/store.js';
import { parseTemplateId } from '../../../notifier/templates/template-id.js';
import { useTestDatabase } from '../../harness/db.js';
import { testLogger } from '../../harness/log.js';
import { waitFor } from '../../harness/wait.js';

const db = await useTestDatabase(t, 'notifier_templates');
await migrate(db.pool, { service: 'notifier', dir: migrationsDir('notifier'), log: testLogger('migrate') });

const put = (id: string, body: Record<string, unknown>) => putTemplate(db.pool, parseTemplateId(id)!, parseDefinition(body));

const WELCOME = {
  default_locale: 'en',
  variants: {
    en: { push: { title: 'Welcome', body: 'Hello {{name}}' }, sms: { body: 'Hello {{name}}' } },
    fr: { push: { title: 'Bienvenue', body: 'Bonjour {{name}}' }, sms: { body: 'Bonjour {{name}}' } },
    fr_CA: { push: { title: 'Bienvenue', body: 'Allô {{name}}' }, sms: { body: 'Allô {{name}}' } },
    pt_BR: { push: { title: 'Bem-vindo', body: 'Olá {{name}}' }, sms: { body: 'Olá {{name}}' } },
    // German needs a variable the others do not: a request without it fails in German, and only there.
    de: { push: { title: 'Willkommen', body: 'Hallo {{title}} {{name}}' }, sms: { body: 'Hallo {{name}}' } },
  },
};
t.equal((await put('welcome_v1', WELCOME)).outcome, 'created');

async function renderFailure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the render to fail');
}

t.test('a variant is chosen xx_YY → xx → default', async (t) => {
  const body = async (locale: string | undefined): Promise<[string, string]> => {
    const r = await renderTemplate(db.pool, { templateId: 'welcome_v1', locale, channel: 'push', data: { name: 'Ann' } });
    return [r.locale, r.body];
  };
  t.same(await body('fr_CA'), ['fr_CA', 'Allô Ann'], 'the exact variant');
  t.same(await body('fr-ca'), ['fr_CA', 'Allô Ann'], 'any spelling of it');
  t.same(await body('fr_BE'), ['fr', 'Bonjour Ann'], 'the language when the region is missing');
  t.same(await body('fr'), ['fr', 'Bonjour Ann']);
  t.same(await body('pt'), ['en', 'Hello Ann'], 'pt does not fall to pt_BR');
  t.same(await body('es_MX'), ['en', 'Hello Ann'], 'the default when neither exists');
  t.same(await body(undefined), ['en', 'Hello Ann'], 'the default without a locale');
  t.same(await body('###'), ['en', 'Hello Ann'], 'the default for an unusable locale');
});

t.test('the output is the channel’s', async (t) => {
  const push: Rendered = await renderTemplate(db.pool, {
    templateId: 'welcome_v1',
    locale: 'de',
    channel: 'push',
    data: { name: 'Ann', title: 'Dr.' },
  });
  t.same(push, { channel: 'push', title: 'Willkommen', body: 'Hallo Dr. Ann', templateId: 'welcome_v1', locale: 'de' });
  const sms = await renderTemplate(db.pool, { templateId: 'welcome_v1', locale: 'fr', channel: 'sms', data: { name: 'Zoë' } });
  t.same(sms, { channel: 'sms', body: 'Bonjour Zoë', segments: 1, encoding: 'ucs2', templateId: 'welcome_v1', locale: 'fr' });
});

t.test('a render error in the chosen locale never falls back to another', async (t) => {
  const err = await renderFailure(
    renderTemplate(db.pool, { templateId: 'welcome_v1', locale: 'de_AT', channel: 'push', data: { name: 'Ann' } }),
  );
  t.type(err, RenderError);
  const e = err as RenderError;
  t.equal(e.code, 'template_render_failed');
  t.equal(e.reason, 'missing_variable');
  t.equal(e.variable, 'title');
  t.same(e.extra, { reason: 'missing_variable', variable: 'title', template_id: 'welcome_v1', locale: 'de', channel: 'push' });
  // The same data renders in German for SMS (which does not use {{title}}) and in English for push.
  t.equal(
    (await renderTemplate(db.pool, { templateId: 'welcome_v1', locale: 'de', channel: 'sms', data: { name: 'Ann' } })).body,
    'Hallo Ann',
  );
  t.equal((await renderTemplate(db.pool, { templateId: 'welcome_v1', channel: 'push', data: { name: 'Ann' } })).body, 'Hello Ann');
  const missing = (await renderFailure(
    renderTemplate(db.pool, { templateId: 'welcome_v1', locale: 'fr', channel: 'email', data: { name: 'Ann' } }),
  )) as RenderError;
  t.equal(missing.reason, 'channel_missing', 'a channel the template has no part for');
});

t.test('an unknown or malformed template id is TemplateNotFoundError (422 unknown_template)', async (t) => {
  for (const id of ['welcome_v2', 'nope_v1', 'welcome', 'welcome_v1.en', "x_v1'; DROP TABLE templates; --"]) {
    const err = await renderFailure(renderTemplate(db.pool, { templateId: id, channel: 'push', data: {} }));
    t.type(err, TemplateNotFoundError, id);
    t.equal((err as PlatformError).code, 'unknown_template');
    t.equal((err as PlatformError).status, 422);
    t.equal((err as PlatformError).field, 'template_id');
    t.equal(await templateExists(db.pool, id), false, `templateExists(${id})`);
  }
  t.equal(await templateExists(db.pool, 'welcome_v1'), true);
  await t.rejects(markTemplateUsed(db.pool, 'nope_v1'), TemplateNotFoundError);
});

t.test('an unused version can be replaced, and the next render shows it', async (t) => {
  await put('draft_v1', { default_locale: 'en', variants: { en: { in_app: { body: 'first {{x}}' } } } });
  t.equal((await renderTemplate(db.pool, { templateId: 'draft_v1', channel: 'in_app', data: { x: '1' } })).body, 'first 1');
  const r = await put('draft_v1', { default_locale: 'en', variants: { en: { in_app: { body: 'second {{x}}' } } } });
  t.equal(r.outcome, 'replaced');
  t.equal((await renderTemplate(db.pool, { templateId: 'draft_v1', channel: 'in_app', data: { x: '1' } })).body, 'second 1');
});

t.test('markTemplateUsed freezes the version', async (t) => {
  const v1 = { default_locale: 'en', variants: { en: { push: { body: 'v1 {{x}}' } } } };
  await put('frozen_v1', v1);
  await markTemplateUsed(db.pool, 'frozen_v1');
  await markTemplateUsed(db.pool, 'frozen_v1'); // idempotent
  const err = await renderFailure(put('frozen_v1', { default_locale: 'en', variants: { en: { push: { body: 'v2 {{x}}' } } } }));
  t.type(err, PlatformError);
  t.equal((err as PlatformError).code, 'template_version_immutable');
  t.equal((err as PlatformError).status, 409);
  t.equal((err as PlatformError).detail, 'frozen_v1 has been used and can no longer change; create frozen_v2 instead');
  t.equal((await put('frozen_v1', v1)).outcome, 'unchanged', 'the same definition again is harmless');
  t.equal((await renderTemplate(db.pool, { templateId: 'frozen_v1', channel: 'push', data: { x: '!' } })).body, 'v1 !');
  const { rows } = await db.pool.query<{ used: boolean }>(
    `SELECT used_at IS NOT NULL AS used FROM templates WHERE template_id = 'frozen_v1'`,
  );
  t.same(rows, [{ used: true }]);
});

t.test('a mark in a transaction that rolls back leaves the version mutable', async (t) => {
  await put('rolled_v1', { default_locale: 'en', variants: { en: { push: { body: 'a' } } } });
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    await markTemplateUsed(client, 'rolled_v1');
    await client.query('ROLLBACK');
  } finally {
    client.release();
  }
  t.equal((await put('rolled_v1', { default_locale: 'en', variants: { en: { push: { body: 'b' } } } })).outcome, 'replaced');
  // And a mark through the pool after that still freezes it (nothing cached the rolled-back mark).
  await markTemplateUsed(db.pool, 'rolled_v1');
  await t.rejects(put('rolled_v1', { default_locale: 'en', variants: { en: { push: { body: 'c' } } } }), {
    code: 'template_version_immutable',
  });
});

t.test('a replacement racing the first use: it waits for the mark and is then refused', async (t) => {
  await put('race_v1', { default_locale: 'en', variants: { en: { push: { body: 'a' } } } });
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    await markTemplateUsed(client, 'race_v1'); // holds the row lock until COMMIT, as ingestion does
    const replacing = put('race_v1', { default_locale: 'en', variants: { en: { push: { body: 'b' } } } });
    replacing.catch(() => {}); // observed below
    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0]!.n > 0;
      },
      { what: 'the replacement to wait on the row lock' },
    );
    await client.query('COMMIT');
    await t.rejects(replacing, { code: 'template_version_immutable' });
  } finally {
    client.release();
  }
  t.equal((await renderTemplate(db.pool, { templateId: 'race_v1', channel: 'push', data: {} })).body, 'a');
});

t.test('a digest renders through renderTemplate: items, count, the top level from the last item', async (t) => {
  await put('likes_digest_v1', {
    default_locale: 'en',
    variants: {
      en: {
        push: { title: '{{actor}} and others: {{count}} likes', body: '{{count}} new: {{#items}}{{actor}} liked {{post}}. {{/items}}' },
      },
      fr: { push: { title: '{{actor}} et d’autres : {{count}}', body: '{{count}} : {{#items}}{{actor}} aime {{post}}. {{/items}}' } },
    },
  });
  const items = [
    { actor: 'Ann', post: 'Pics' },
    { actor: 'Bob', post: 'Cats' },
  ];
  const r = await renderTemplate(db.pool, { templateId: 'likes_digest_v1', locale: 'fr_CA', channel: 'push', data: {}, items, count: 5 });
  t.same(r, {
    channel: 'push',
    title: 'Bob et d’autres : 5',
    body: '5 : Ann aime Pics. Bob aime Cats. ',
    templateId: 'likes_digest_v1',
    locale: 'fr',
  });

  const err = (await renderFailure(
    renderTemplate(db.pool, { templateId: 'likes_digest_v1', channel: 'push', data: { actor: 'Ann', post: 'Pics', count: '1' } }),
  )) as RenderError;
  t.type(err, RenderError, 'not a digest render');
  t.same(err.extra, { reason: 'missing_variable', variable: 'items', template_id: 'likes_digest_v1', locale: 'en', channel: 'push' });

  const inItem = (await renderFailure(
    renderTemplate(db.pool, { templateId: 'likes_digest_v1', channel: 'push', data: {}, items: [{ actor: 'Ann' }] }),
  )) as RenderError;
  t.equal(inItem.variable, 'post');
  t.equal(inItem.detail, 'items[0] has no value for {{post}}');

  await t.rejects(renderTemplate(db.pool, { templateId: 'likes_digest_v1', channel: 'push', data: {}, count: 2 }), RangeError);
});
