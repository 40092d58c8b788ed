// @tier: pure
/**
 * How the operations pages turn a submitted form into an API body, and an API's refusal back into
 * the form's fields (pure): a client registration leaves empty fields out (identity's defaults
 * apply), a ramp change sends the weights only when both are filled and passes a non-number on for
 * the notifier to refuse by name, a rule segment's fields map to and from `rule.<key>`.
 */
import t from 'tap';
import { readForm, registrationOf } from '../../console/pages/clients.js';
import { rampChangeOf } from '../../console/pages/providers.js';
import { formProblem, readRuleForm, ruleOf } from '../../console/pages/segments.js';
import type { RampView } from '../../console/api/notifier-providers.js';

t.test('a client registration: only what was filled in, redirect URIs one per line', async (t) => {
  t.same(
    registrationOf(
      readForm(new URLSearchParams('client_type=confidential&client_id=&name=&redirect_uris=&scope=&role=service&tenant_id=&plan=')),
    ),
    {
      client_type: 'confidential',
      role: 'service',
    },
  );
  const f = new URLSearchParams();
  for (const [k, v] of [
    ['client_type', 'public'],
    ['client_id', ' web '],
    ['name', 'Web app'],
    ['redirect_uris', 'https://app.example/cb\r\n\r\n  http://127.0.0.1:7/cb  \n'],
    ['grant_types', 'authorization_code'],
    ['grant_types', 'refresh_token'],
    ['scope', 'openid read:orders'],
    ['role', 'service'],
    ['tenant_id', 'acme'],
    ['plan', 'pro'],
    ['dpop_bound_access_tokens', 'on'],
  ])
    f.append(k!, v!);
  t.same(registrationOf(readForm(f)), {
    client_type: 'public',
    client_id: 'web',
    name: 'Web app',
    redirect_uris: ['https://app.example/cb', 'http://127.0.0.1:7/cb'],
    grant_types: ['authorization_code', 'refresh_token'],
    scope: 'openid read:orders',
    role: 'service',
    tenant_id: 'acme',
    plan: 'pro',
    dpop_bound_access_tokens: true,
  });
});

t.test('a ramp change: weights when both are filled, the shadow share when given, non-numbers passed on', async (t) => {
  const view: RampView = {
    channel: 'push',
    providers: [
      { name: 'fcm', role: 'old', weight_percent: 100 },
      { name: 'fcm-v2', role: 'new', weight_percent: 0 },
      { name: 'fcm-backup', role: 'secondary' },
    ],
    shadow_percent: 0,
    shadow: 'validate_only',
    updated_by: null,
    updated_at: null,
  };
  t.same(
    rampChangeOf(view, new URLSearchParams('weights.fcm=95&weights.fcm-v2=5&shadow_percent=')),
    { weights: { fcm: 95, 'fcm-v2': 5 } },
    'the secondary is never sent',
  );
  t.same(
    rampChangeOf(view, new URLSearchParams('weights.fcm=95&weights.fcm-v2=&shadow_percent=2.5')),
    { shadow_percent: 2.5 },
    'one weight alone: only the shadow',
  );
  t.same(
    rampChangeOf(view, new URLSearchParams('weights.fcm=abc&weights.fcm-v2=5')),
    { weights: { fcm: 'abc', 'fcm-v2': 5 } },
    'the notifier refuses it by name',
  );
  t.same(rampChangeOf(view, new URLSearchParams('')), {}, 'nothing filled: an empty change, which the notifier refuses');
});

t.test('a rule segment: the fields as a rule, and the notifier refusal back on the fields', async (t) => {
  t.same(ruleOf(readRuleForm(new URLSearchParams('segment_id= fr &locale=fr&timezone=&tags=beta,%20vip  gold'))), {
    locale: 'fr',
    tags: ['beta', 'vip', 'gold'],
  });
  t.same(readRuleForm(new URLSearchParams('segment_id=x&locale=en'), 'given').id, 'given', 'the id from the path wins');
  t.same(ruleOf(readRuleForm(new URLSearchParams(''))), {}, 'empty: the notifier says a rule needs a key');
  t.match(
    formProblem({
      title: 't',
      status: 400,
      code: 'invalid_field',
      field: 'rule.timezone',
      detail: 'rule.timezone: must be an IANA time zone',
    }),
    {
      field: 'timezone',
      detail: 'timezone: must be an IANA time zone',
    },
  );
  t.match(
    formProblem({ title: 't', status: 400, code: 'invalid_field', field: 'rule', detail: 'rule: must have at least one of locale' }),
    { field: 'locale' },
  );
  t.match(formProblem({ title: 't', status: 400, code: 'invalid_field', field: 'segment_id', detail: 'segment_id: bad' }), {
    field: 'segment_id',
  });
});
