// @tier: pure
/**
 * The notifier's policies, pure parts: the type catalogue (every configuration error by the field
 * it names, the file form, how a request's type is found), the type × tier table cell by cell with
 * every NOTIFIER_QUIET_HOURS_TIERS setting, channel resolution, the check before the provider call
 * in its header's order, the cap's verdicts, and the preferences document (every 400 of a PATCH by
 * its field, the merge, the API's JSON, a stored document read back). Quiet hours themselves are
 * quiet-hours.test.ts's; the preference cache is cache.test.ts's.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChannelName, Tier } from '../../../notifier/channels/channel.js';
import {
  DEFAULT_FAILOVER,
  DEFAULT_NOTIFICATION_TYPES,
  parseTypeCatalog,
  type NotificationType,
  type TypeCatalog,
} from '../../../notifier/policy/types.js';
import { failoverTarget } from '../../../notifier/policy/failover.js';
import { isExempt, policyFor, type Policy, type PolicySettings } from '../../../notifier/policy/table.js';
import { planChannels, userChoice, type ChannelPlan } from '../../../notifier/policy/resolve.js';
import { capVerdicts, gate, type GateInput } from '../../../notifier/policy/gate.js';
import {
  applyPreferencePatch,
  parsePreferencePatch,
  preferencesJson,
  storedPreferences,
  type PreferenceDoc,
} from '../../../notifier/preferences/document.js';
import { isPlatformError } from '../../../shared/errors.js';

const SECOND = 1_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const TIERS: readonly Tier[] = ['transactional', 'high', 'normal', 'low'];
const DEFAULT_SETTINGS: PolicySettings = { quietHoursTiers: ['normal'] };

function at(iso: string): number {
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new Error(`bad ISO instant in test: ${iso}`);
  return ms;
}

/** The message of what `fn` throws (`"no error"` when it returns). */
function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  return 'no error';
}

/** The default catalogue plus a digesting type and an SMS-only one, for the table and resolution. */
const catalog: TypeCatalog = parseTypeCatalog(
  JSON.stringify({
    ...(JSON.parse(DEFAULT_NOTIFICATION_TYPES) as Record<string, unknown>),
    weekly_digest: {
      events: ['digest.*'],
      channels: ['push', 'email'],
      digest: { window: '1h', template: 'weekly_digest_v1', max_items: 10 },
    },
    sms_only: { events: ['otp.*'], channels: ['sms'] },
    no_defaults: { events: ['ping.*'], channels: [] },
  }),
);

function type(name: string): NotificationType {
  const found = catalog.types.get(name);
  if (!found) throw new Error(`no type ${name} in the test catalogue`);
  return found;
}

// ---------------------------------------------------------------------------------------------
// The type catalogue
// ---------------------------------------------------------------------------------------------

/** A catalogue with a valid security_alerts first, then `types`. */
function withSecurity(types: Record<string, unknown>): string {
  return JSON.stringify({ security_alerts: { events: ['security.*'], mandatory: true }, ...types });
}

t.test('the default catalogue parses to the documented types', async (t) => {
  const c = parseTypeCatalog(DEFAULT_NOTIFICATION_TYPES);
  t.same([...c.types.keys()], ['order_updates', 'social_activity', 'security_alerts', 'marketing', 'general']);
  const view = (n: NotificationType) => ({ ...n, channels: [...n.channels] });
  t.same(view(c.types.get('order_updates')!), {
    name: 'order_updates',
    events: ['order.*', 'payment.*', 'shipping.*'],
    channels: ['push', 'email', 'in_app'],
    mandatory: false,
    sms: true,
    caps: {},
    digest: undefined,
    failover: DEFAULT_FAILOVER,
  });
  t.same(view(c.types.get('social_activity')!), {
    name: 'social_activity',
    events: ['social.*'],
    channels: ['push', 'in_app'],
    mandatory: false,
    sms: true,
    caps: { push: { limit: 10, windowMs: HOUR } },
    // Seed 000: normal is "subject to rate caps and digesting", example window 5 minutes.
    digest: { windowMs: 5 * 60_000, template: 'social_digest_v1', maxItems: 50 },
    failover: DEFAULT_FAILOVER,
  });
  t.same(view(c.types.get('security_alerts')!), {
    name: 'security_alerts',
    events: ['security.*', 'auth.*', 'account.*'],
    channels: ['push', 'email'],
    mandatory: true,
    sms: true,
    caps: {},
    digest: undefined,
    failover: DEFAULT_FAILOVER,
  });
  t.same(view(c.types.get('marketing')!), {
    name: 'marketing',
    events: ['marketing.*', 'campaign.*'],
    channels: ['push', 'email', 'in_app'],
    mandatory: false,
    sms: false,
    caps: { push: { limit: 5, windowMs: HOUR }, email: { limit: 3, windowMs: 24 * HOUR } },
    digest: undefined,
    failover: { push: ['in_app'], email: ['in_app'], sms: ['in_app'] },
  });
  t.same(view(c.types.get('general')!), {
    name: 'general',
    events: ['*'],
    channels: ['push'],
    mandatory: false,
    sms: true,
    caps: {},
    digest: undefined,
    failover: DEFAULT_FAILOVER,
  });
});

t.test('defaults of a type: channels push, not mandatory, sms allowed except for marketing, digest max_items 50', async (t) => {
  const c = parseTypeCatalog(
    withSecurity({
      bare: {},
      marketing: { events: ['promo.*'] },
      folded: { events: ['fold.*'], digest: { window: '30m', template: 'folded_v3' } },
    }),
  );
  const bare = c.types.get('bare')!;
  t.same([...bare.channels], ['push']);
  t.same(bare.events, []);
  t.equal(bare.mandatory, false);
  t.equal(bare.sms, true);
  t.equal(c.types.get('marketing')!.sms, false, 'marketing is sms: false without saying so');
  t.same(c.types.get('folded')!.digest, { windowMs: 30 * 60_000, template: 'folded_v3', maxItems: 50 });
  t.same(c.types.get('security_alerts')!.mandatory, true);
});

t.test('each configuration error names the faulty field', async (t) => {
  const cases: [string, string, string][] = [
    [
      'unknown field',
      withSecurity({ order_updates: { events: ['order.*'], colour: 'red' } }),
      'order_updates.colour: unknown field (events, channels, mandatory, sms, caps, digest, failover)',
    ],
    [
      'type name with a capital',
      withSecurity({ Orders: { events: ['order.*'] } }),
      'type "Orders": names are a-z, 0-9 and _, starting with a letter (and not quiet_hours)',
    ],
    [
      'type name with a dash',
      withSecurity({ 'order-updates': {} }),
      'type "order-updates": names are a-z, 0-9 and _, starting with a letter (and not quiet_hours)',
    ],
    [
      'type name starting with a digit',
      withSecurity({ '1st': {} }),
      'type "1st": names are a-z, 0-9 and _, starting with a letter (and not quiet_hours)',
    ],
    [
      'the reserved type name quiet_hours',
      withSecurity({ quiet_hours: {} }),
      'type "quiet_hours": names are a-z, 0-9 and _, starting with a letter (and not quiet_hours)',
    ],
    ['a type that is not an object', withSecurity({ orders: ['order.*'] }), 'orders: must be an object'],
    [
      'event pattern with three parts',
      withSecurity({ orders: { events: ['order.item.shipped'] } }),
      'orders.events: must be a list of "domain.action", "domain.*" or "*"',
    ],
    [
      'event pattern with a wildcard domain',
      withSecurity({ orders: { events: ['*.shipped'] } }),
      'orders.events: must be a list of "domain.action", "domain.*" or "*"',
    ],
    [
      'event pattern in capitals',
      withSecurity({ orders: { events: ['Order.*'] } }),
      'orders.events: must be a list of "domain.action", "domain.*" or "*"',
    ],
    [
      'events not a list',
      withSecurity({ orders: { events: 'order.*' } }),
      'orders.events: must be a list of "domain.action", "domain.*" or "*"',
    ],
    [
      'unknown channel',
      withSecurity({ orders: { channels: ['push', 'fax'] } }),
      'orders.channels[1]: "fax" is not a channel (push, email, sms, in_app)',
    ],
    ['channels not a list', withSecurity({ orders: { channels: 'push' } }), 'orders.channels: must be a list of channels'],
    ['mandatory not a boolean', withSecurity({ orders: { mandatory: 'yes' } }), 'orders.mandatory: must be true or false'],
    ['sms not a boolean', withSecurity({ orders: { sms: 1 } }), 'orders.sms: must be true or false'],
    [
      'cap on an unknown channel',
      withSecurity({ orders: { caps: { fax: { limit: 1, window: '1h' } } } }),
      'orders.caps: "fax" is not a channel (push, email, sms, in_app)',
    ],
    ['caps not an object', withSecurity({ orders: { caps: [] } }), 'orders.caps: must be an object of channel → {limit, window}'],
    ['a cap that is not an object', withSecurity({ orders: { caps: { push: 5 } } }), 'orders.caps.push: must be {limit, window}'],
    [
      'cap limit 0',
      withSecurity({ orders: { caps: { push: { limit: 0, window: '1h' } } } }),
      'orders.caps.push.limit: must be an integer from 1 to 100000',
    ],
    [
      'cap limit not an integer',
      withSecurity({ orders: { caps: { push: { limit: 2.5, window: '1h' } } } }),
      'orders.caps.push.limit: must be an integer from 1 to 100000',
    ],
    [
      'cap limit as a string',
      withSecurity({ orders: { caps: { push: { limit: '5', window: '1h' } } } }),
      'orders.caps.push.limit: must be an integer from 1 to 100000',
    ],
    [
      'cap limit above 100000',
      withSecurity({ orders: { caps: { email: { limit: 100_001, window: '1h' } } } }),
      'orders.caps.email.limit: must be an integer from 1 to 100000',
    ],
    [
      'cap window not a duration',
      withSecurity({ orders: { caps: { push: { limit: 5, window: 'hourly' } } } }),
      'orders.caps.push.window: must be a duration such as 500ms, 5s, 2m, 1h or 14d',
    ],
    [
      'cap window missing',
      withSecurity({ orders: { caps: { push: { limit: 5 } } } }),
      'orders.caps.push.window: must be a duration such as "5m" or "1h"',
    ],
    [
      'cap window under a second',
      withSecurity({ orders: { caps: { push: { limit: 5, window: '500ms' } } } }),
      'orders.caps.push.window: must be between 1s and 31 days',
    ],
    [
      'cap window over 31 days',
      withSecurity({ orders: { caps: { push: { limit: 5, window: '32d' } } } }),
      'orders.caps.push.window: must be between 1s and 31 days',
    ],
    [
      'digest with a bad template id',
      withSecurity({ orders: { digest: { window: '1h', template: 'Order Digest' } } }),
      'orders.digest.template: must be a template id <name>_v<N>',
    ],
    [
      'digest template without a version',
      withSecurity({ orders: { digest: { window: '1h', template: 'order_digest' } } }),
      'orders.digest.template: must be a template id <name>_v<N>',
    ],
    [
      'digest with an unknown field',
      withSecurity({ orders: { digest: { window: '1h', template: 'order_digest_v1', every: '1h' } } }),
      'orders.digest.every: unknown field',
    ],
    [
      'digest max_items 0',
      withSecurity({ orders: { digest: { window: '1h', template: 'order_digest_v1', max_items: 0 } } }),
      'orders.digest.max_items: must be an integer from 1 to 1000',
    ],
    [
      'digest window over a day',
      withSecurity({ orders: { digest: { window: '2d', template: 'order_digest_v1' } } }),
      'orders.digest.window: must be between 1s and 1 days',
    ],
    ['digest not an object', withSecurity({ orders: { digest: '1h' } }), 'orders.digest: must be {window, template, max_items}'],
    ['marketing with sms true', withSecurity({ marketing: { sms: true } }), 'marketing.sms: SMS is never used for marketing'],
    [
      'marketing listing sms',
      withSecurity({ marketing: { channels: ['push', 'sms'] } }),
      'marketing.channels: sms is listed but marketing.sms is false',
    ],
    [
      'sms false but sms listed in channels',
      withSecurity({ orders: { channels: ['sms'], sms: false } }),
      'orders.channels: sms is listed but orders.sms is false',
    ],
    [
      'a duplicate event pattern across two types',
      withSecurity({ orders: { events: ['order.*'] }, shipping: { events: ['ship.*', 'order.*'] } }),
      'shipping.events: "order.*" is already orders\'s',
    ],
    [
      'a duplicate exact event pattern',
      withSecurity({ orders: { events: ['order.shipped'] }, shipping: { events: ['order.shipped'] } }),
      'shipping.events: "order.shipped" is already orders\'s',
    ],
    ['two catch-alls', withSecurity({ general: { events: ['*'] }, other: { events: ['*'] } }), 'other.events: "*" is already general\'s'],
    [
      'security_alerts missing',
      JSON.stringify({ general: { events: ['*'] } }),
      'security_alerts: must exist and be mandatory (a user cannot turn security alerts off)',
    ],
    [
      'security_alerts not mandatory',
      JSON.stringify({ security_alerts: { events: ['security.*'] } }),
      'security_alerts: must exist and be mandatory (a user cannot turn security alerts off)',
    ],
    [
      'security_alerts explicitly not mandatory',
      JSON.stringify({ security_alerts: { events: ['security.*'], mandatory: false } }),
      'security_alerts: must exist and be mandatory (a user cannot turn security alerts off)',
    ],
    [
      'failover neither false nor an object',
      withSecurity({ orders: { failover: ['sms'] } }),
      'orders.failover: must be false or an object of channel → list of channels',
    ],
    [
      'failover from an unknown channel',
      withSecurity({ orders: { failover: { fax: [] } } }),
      'orders.failover: "fax" is not a channel (push, email, sms, in_app)',
    ],
    [
      'failover list not a list',
      withSecurity({ orders: { failover: { push: 'sms' } } }),
      'orders.failover.push: must be a list of channels',
    ],
    [
      'failover to an unknown channel',
      withSecurity({ orders: { failover: { push: ['sms', 'pigeon'] } } }),
      'orders.failover.push[1]: "pigeon" is not a channel (push, email, sms, in_app)',
    ],
    [
      'failover to itself',
      withSecurity({ orders: { failover: { push: ['push'] } } }),
      'orders.failover.push: a channel cannot fail over to itself',
    ],
    [
      'failover twice to one',
      withSecurity({ orders: { failover: { push: ['sms', 'sms'] } } }),
      'orders.failover.push: lists a channel twice',
    ],
    [
      'failover to sms for a type without sms',
      withSecurity({ marketing: { failover: { push: ['sms'] } } }),
      'marketing.failover.push: sms is listed but marketing.sms is false',
    ],
    ['empty object', '{}', 'must be a JSON object with at least one type'],
    ['empty object with spaces', '  { }  ', 'must be a JSON object with at least one type'],
  ];
  for (const [what, raw, message] of cases)
    t.equal(
      errorOf(() => parseTypeCatalog(raw)),
      message,
      what,
    );

  t.match(
    errorOf(() => parseTypeCatalog('{"security_alerts": ')),
    /^not JSON: /,
    'not JSON',
  );
  t.match(
    errorOf(() => parseTypeCatalog("{'a': 1}")),
    /^not JSON: /,
    'not JSON (single quotes)',
  );
});

t.test('the catalogue may be the path of a file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'notifier-types-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  const good = join(dir, 'types.json');
  writeFileSync(good, withSecurity({ orders: { events: ['order.*'], channels: ['email'] } }));
  const c = parseTypeCatalog(good);
  t.same([...c.types.keys()], ['security_alerts', 'orders']);
  t.same([...c.types.get('orders')!.channels], ['email']);
  t.equal(c.typeOf('order.shipped')?.name, 'orders');

  const defaults = join(dir, 'defaults.json');
  writeFileSync(defaults, DEFAULT_NOTIFICATION_TYPES);
  t.same([...parseTypeCatalog(defaults).types.keys()], [...parseTypeCatalog(DEFAULT_NOTIFICATION_TYPES).types.keys()]);

  const broken = join(dir, 'broken.json');
  writeFileSync(broken, '{"security_alerts": {');
  t.match(
    errorOf(() => parseTypeCatalog(broken)),
    /^not JSON: /,
    'a file that is not JSON',
  );

  const invalid = join(dir, 'invalid.json');
  writeFileSync(invalid, withSecurity({ orders: { channels: ['fax'] } }));
  t.equal(
    errorOf(() => parseTypeCatalog(invalid)),
    'orders.channels[0]: "fax" is not a channel (push, email, sms, in_app)',
    'a file is validated like inline JSON',
  );

  const empty = join(dir, 'empty.json');
  writeFileSync(empty, '{}');
  t.equal(
    errorOf(() => parseTypeCatalog(empty)),
    'must be a JSON object with at least one type',
  );

  t.match(
    errorOf(() => parseTypeCatalog(join(dir, 'missing.json'))),
    /ENOENT/,
    'a missing file',
  );
  t.equal(
    errorOf(() => parseTypeCatalog(`  ${withSecurity({})}`)),
    'no error',
    'inline JSON after leading spaces is still inline, not a path',
  );
});

t.test("typeOf: the request's named type wins, then exact event, then domain.*, then *", async (t) => {
  const c = parseTypeCatalog(
    withSecurity({
      shipped: { events: ['order.shipped'] },
      orders: { events: ['order.*'] },
      general: { events: ['*'] },
    }),
  );
  t.equal(c.typeOf('order.shipped')?.name, 'shipped', 'an exact event name beats domain.*');
  t.equal(c.typeOf('order.paid')?.name, 'orders', 'domain.* beats *');
  t.equal(c.typeOf('security.login')?.name, 'security_alerts');
  t.equal(c.typeOf('billing.paid')?.name, 'general', '* catches the rest');
  t.equal(c.typeOf('orders.shipped')?.name, 'general', 'a domain is matched whole, not as a prefix');
  t.equal(c.typeOf('order.shipped', 'security_alerts')?.name, 'security_alerts', 'the named type wins over an exact event');
  t.equal(c.typeOf('billing.paid', 'orders')?.name, 'orders', 'the named type wins over *');
  t.equal(c.typeOf('order.shipped', 'newsletter'), undefined, 'an unknown named type is undefined, not a fallback');
  t.equal(c.typeOf('order.shipped', 'quiet_hours'), undefined);

  const noCatchAll = parseTypeCatalog(withSecurity({ orders: { events: ['order.*'] } }));
  t.equal(noCatchAll.typeOf('order.paid')?.name, 'orders');
  t.equal(noCatchAll.typeOf('billing.paid'), undefined, 'without *, an unmatched event has no type');

  const d = parseTypeCatalog(DEFAULT_NOTIFICATION_TYPES);
  const byEvent: [string, string][] = [
    ['order.shipped', 'order_updates'],
    ['payment.failed', 'order_updates'],
    ['shipping.delayed', 'order_updates'],
    ['social.follow', 'social_activity'],
    ['security.new_device', 'security_alerts'],
    ['auth.password_reset', 'security_alerts'],
    ['account.locked', 'security_alerts'],
    ['marketing.spring_sale', 'marketing'],
    ['campaign.launch', 'marketing'],
    ['weather.alert', 'general'],
  ];
  for (const [event, name] of byEvent) t.equal(d.typeOf(event)?.name, name, `default catalogue: ${event} → ${name}`);
});

// ---------------------------------------------------------------------------------------------
// The type × tier table
// ---------------------------------------------------------------------------------------------

interface PolicyView {
  allowed: ChannelName[];
  optOut: boolean;
  caps: boolean;
  quietHours: boolean;
  digest: boolean;
}

function view(p: Policy): PolicyView {
  return { allowed: [...p.allowed], optOut: p.optOut, caps: p.caps, quietHours: p.quietHours, digest: p.digest };
}

const ALL: ChannelName[] = ['push', 'email', 'sms', 'in_app'];
const NO_SMS: ChannelName[] = ['push', 'email', 'in_app'];
const cell = (allowed: ChannelName[], optOut: boolean, caps: boolean, quietHours: boolean, digest: boolean): PolicyView => ({
  allowed,
  optOut,
  caps,
  quietHours,
  digest,
});

t.test("policyFor: every cell of table.ts's table, with the default NOTIFIER_QUIET_HOURS_TIERS (normal)", async (t) => {
  // prettier-ignore
  const table: Record<Tier, Record<string, PolicyView>> = {
    //                                 allowed  optOut caps   quiet  digest
    transactional: {
      order_updates:   cell(ALL,    false, false, false, false),
      security_alerts: cell(ALL,    false, false, false, false),
      marketing:       cell(NO_SMS, false, false, false, false),
      weekly_digest:   cell(ALL,    false, false, false, false),
    },
    high: {
      order_updates:   cell(ALL,    true,  false, false, false),
      security_alerts: cell(ALL,    false, false, false, false),
      marketing:       cell(NO_SMS, true,  false, false, false),
      weekly_digest:   cell(ALL,    true,  false, false, false),
    },
    normal: {
      order_updates:   cell(NO_SMS, true,  true,  true,  false),
      security_alerts: cell(ALL,    false, false, false, false),
      marketing:       cell(NO_SMS, true,  true,  true,  false),
      weekly_digest:   cell(NO_SMS, true,  true,  true,  true),
    },
    low: {
      order_updates:   cell(NO_SMS, true,  true,  true,  false),
      security_alerts: cell(ALL,    false, false, false, false),
      marketing:       cell(NO_SMS, true,  true,  true,  false),
      weekly_digest:   cell(NO_SMS, true,  true,  true,  true),
    },
  };
  for (const tier of TIERS) {
    for (const [name, expected] of Object.entries(table[tier])) {
      t.same(view(policyFor(type(name), tier, DEFAULT_SETTINGS)), expected, `${tier} × ${name}`);
      t.equal(isExempt(type(name), tier), !expected.optOut, `${tier} × ${name}: exempt`);
    }
  }
});

t.test('policyFor: a mandatory type with sms: false never gets SMS, whatever the tier', async (t) => {
  const c = parseTypeCatalog(JSON.stringify({ security_alerts: { events: ['auth.*'], mandatory: true, sms: false } }));
  for (const tier of TIERS) t.same([...policyFor(c.types.get('security_alerts')!, tier, DEFAULT_SETTINGS).allowed], NO_SMS, tier);
});

t.test('policyFor: quiet hours under every NOTIFIER_QUIET_HOURS_TIERS setting', async (t) => {
  const settings: [readonly Tier[], Record<Tier, boolean>][] = [
    [[], { transactional: false, high: false, normal: false, low: true }],
    [['normal'], { transactional: false, high: false, normal: true, low: true }],
    [['high'], { transactional: false, high: true, normal: false, low: true }],
    [['normal', 'high'], { transactional: false, high: true, normal: true, low: true }],
  ];
  for (const [quietHoursTiers, expected] of settings) {
    for (const tier of TIERS) {
      const label = `[${quietHoursTiers.join(',')}] ${tier}`;
      t.equal(policyFor(type('order_updates'), tier, { quietHoursTiers }).quietHours, expected[tier], `${label} × order_updates`);
      t.equal(policyFor(type('weekly_digest'), tier, { quietHoursTiers }).quietHours, expected[tier], `${label} × weekly_digest`);
      t.equal(policyFor(type('security_alerts'), tier, { quietHoursTiers }).quietHours, false, `${label} × security_alerts (mandatory)`);
      // Nothing else in the cell moves with this setting.
      const a = view(policyFor(type('order_updates'), tier, { quietHoursTiers }));
      const b = view(policyFor(type('order_updates'), tier, DEFAULT_SETTINGS));
      t.same({ ...a, quietHours: null }, { ...b, quietHours: null }, `${label}: only quiet hours change`);
    }
  }
});

// ---------------------------------------------------------------------------------------------
// Channel resolution
// ---------------------------------------------------------------------------------------------

function plan(name: string, tier: Tier, requested: ChannelName[], prefs: PreferenceDoc | 'unavailable'): ChannelPlan[] {
  const ty = type(name);
  return planChannels({ requested, type: ty, policy: policyFor(ty, tier, DEFAULT_SETTINGS), prefs });
}

const none: PreferenceDoc = { types: {} };

t.test('userChoice: the explicit choice, or undefined', async (t) => {
  const prefs: PreferenceDoc = { types: { marketing: { push: false, email: true } } };
  t.equal(userChoice(prefs, 'marketing', 'push'), false);
  t.equal(userChoice(prefs, 'marketing', 'email'), true);
  t.equal(userChoice(prefs, 'marketing', 'in_app'), undefined);
  t.equal(userChoice(prefs, 'order_updates', 'push'), undefined);
});

t.test('planChannels: requested channels are kept, minus those the table does not allow', async (t) => {
  t.same(plan('order_updates', 'normal', ['push', 'sms', 'email'], none), [
    { channel: 'push', fate: 'send' },
    { channel: 'email', fate: 'send' },
  ]);
  t.same(plan('order_updates', 'high', ['sms', 'push'], none), [
    { channel: 'sms', fate: 'send' },
    { channel: 'push', fate: 'send' },
  ]);
  t.same(plan('marketing', 'transactional', ['sms', 'in_app'], none), [{ channel: 'in_app', fate: 'send' }], 'marketing: never sms');
  t.same(
    plan('order_updates', 'normal', ['in_app'], { types: { order_updates: { push: true, email: true } } }),
    [{ channel: 'in_app', fate: 'send' }],
    "the user's on does not add to named channels",
  );
});

t.test(
  "planChannels: the user's off is opted_out even when requested, but not for the transactional tier or a mandatory type",
  async (t) => {
    const off: PreferenceDoc = {
      types: { marketing: { email: false }, order_updates: { email: false }, security_alerts: { email: false } },
    };
    for (const tier of ['high', 'normal', 'low'] as const) {
      t.same(
        plan('order_updates', tier, ['push', 'email'], off),
        [
          { channel: 'push', fate: 'send' },
          { channel: 'email', fate: 'opted_out' },
        ],
        tier,
      );
    }
    t.same(plan('order_updates', 'transactional', ['push', 'email'], off), [
      { channel: 'push', fate: 'send' },
      { channel: 'email', fate: 'send' },
    ]);
    // The API refuses turning a mandatory type off; a stored document might still say so.
    t.same(plan('security_alerts', 'low', ['email'], off), [{ channel: 'email', fate: 'send' }]);
    t.same(plan('security_alerts', 'normal', [], off), [
      { channel: 'push', fate: 'send' },
      { channel: 'email', fate: 'send' },
    ]);
    t.same(
      plan('order_updates', 'high', ['email'], { types: { marketing: { email: false } } }),
      [{ channel: 'email', fate: 'send' }],
      "another type's off does not count",
    );
  },
);

t.test("planChannels without named channels: the user's on with the type's defaults; all off stays visible; nothing → push", async (t) => {
  t.same(plan('order_updates', 'normal', [], none), [
    { channel: 'push', fate: 'send' },
    { channel: 'email', fate: 'send' },
    { channel: 'in_app', fate: 'send' },
  ]);
  t.same(
    plan('order_updates', 'high', [], { types: { order_updates: { sms: true, email: false } } }),
    [
      { channel: 'push', fate: 'send' },
      { channel: 'email', fate: 'opted_out' },
      { channel: 'in_app', fate: 'send' },
      { channel: 'sms', fate: 'send' },
    ],
    "the user's sms on is added at high; the default the user turned off is shown opted_out",
  );
  t.same(
    plan('order_updates', 'normal', [], { types: { order_updates: { sms: true, in_app: false } } }),
    [
      { channel: 'push', fate: 'send' },
      { channel: 'email', fate: 'send' },
      { channel: 'in_app', fate: 'opted_out' },
    ],
    "the user's sms on is not allowed at normal",
  );
  // social_activity digests at normal by default (seed 000): each resolved channel joins its digest.
  t.same(plan('social_activity', 'normal', [], { types: { social_activity: { email: true, push: true } } }), [
    { channel: 'push', fate: 'digest' },
    { channel: 'in_app', fate: 'digest' },
    { channel: 'email', fate: 'digest' },
  ]);
  t.same(
    plan('marketing', 'low', [], { types: { marketing: { push: false, email: false, in_app: false } } }),
    [
      { channel: 'push', fate: 'opted_out' },
      { channel: 'email', fate: 'opted_out' },
      { channel: 'in_app', fate: 'opted_out' },
    ],
    'every default off: all of them opted_out, visible, and nothing else',
  );
  t.same(plan('no_defaults', 'normal', [], none), [{ channel: 'push', fate: 'send' }], 'no defaults, nothing on: push');
  t.same(
    plan('no_defaults', 'normal', [], { types: { no_defaults: { push: false } } }),
    [{ channel: 'push', fate: 'opted_out' }],
    'the push fallback still honours an off',
  );
  t.same(plan('sms_only', 'normal', [], none), [{ channel: 'push', fate: 'send' }], 'an sms-only type at normal: push');
  t.same(plan('sms_only', 'high', [], none), [{ channel: 'sms', fate: 'send' }]);
  t.same(
    plan('no_defaults', 'low', [], { types: { no_defaults: { email: true } } }),
    [{ channel: 'email', fate: 'send' }],
    "the user's on alone",
  );
});

t.test('planChannels: a digesting type digests at normal and low only; opted_out beats digest', async (t) => {
  const expected: Record<Tier, string> = { transactional: 'send', high: 'send', normal: 'digest', low: 'digest' };
  for (const tier of TIERS) {
    t.same(
      plan('weekly_digest', tier, [], none),
      [
        { channel: 'push', fate: expected[tier] },
        { channel: 'email', fate: expected[tier] },
      ],
      tier,
    );
    t.same(plan('weekly_digest', tier, ['email'], none), [{ channel: 'email', fate: expected[tier] }], `${tier}, named`);
  }
  t.same(plan('weekly_digest', 'normal', [], { types: { weekly_digest: { email: false } } }), [
    { channel: 'push', fate: 'digest' },
    { channel: 'email', fate: 'opted_out' },
  ]);
  t.same(plan('order_updates', 'low', [], none)[0], { channel: 'push', fate: 'send' }, 'a type without a digest never digests');
});

t.test('planChannels with unreadable preferences: push when nothing is named, named kept; exempt sends get the defaults', async (t) => {
  t.same(plan('order_updates', 'normal', [], 'unavailable'), [{ channel: 'push', fate: 'send' }]);
  t.same(plan('marketing', 'high', [], 'unavailable'), [{ channel: 'push', fate: 'send' }]);
  t.same(plan('weekly_digest', 'normal', [], 'unavailable'), [{ channel: 'push', fate: 'digest' }]);
  t.same(plan('order_updates', 'normal', ['email', 'sms', 'in_app'], 'unavailable'), [
    { channel: 'email', fate: 'send' },
    { channel: 'in_app', fate: 'send' },
  ]);
  t.same(plan('order_updates', 'high', ['sms'], 'unavailable'), [{ channel: 'sms', fate: 'send' }]);
  t.same(plan('order_updates', 'transactional', [], 'unavailable'), [
    { channel: 'push', fate: 'send' },
    { channel: 'email', fate: 'send' },
    { channel: 'in_app', fate: 'send' },
  ]);
  t.same(plan('security_alerts', 'low', [], 'unavailable'), [
    { channel: 'push', fate: 'send' },
    { channel: 'email', fate: 'send' },
  ]);
  t.same(plan('security_alerts', 'normal', ['sms'], 'unavailable'), [{ channel: 'sms', fate: 'send' }]);
  t.same(plan('no_defaults', 'transactional', [], 'unavailable'), [{ channel: 'push', fate: 'send' }], 'exempt, no defaults: push');
  t.same(plan('sms_only', 'transactional', [], 'unavailable'), [{ channel: 'sms', fate: 'send' }]);
});

// ---------------------------------------------------------------------------------------------
// The check before the provider call
// ---------------------------------------------------------------------------------------------

const PARIS = 'Europe/Paris';
const NIGHT: PreferenceDoc = { types: {}, quiet_hours: { start: '22:00', end: '07:00' } };
const LATE = at('2026-01-15T23:30:00+01:00'); // inside 22:00–07:00 in Paris
const NOON = at('2026-01-15T12:00:00+01:00'); // outside
const RELEASE = at('2026-01-16T07:00:00+01:00');

function gateOf(
  name: string,
  tier: Tier,
  channel: ChannelName,
  prefs: PreferenceDoc | 'unavailable',
  over: Partial<GateInput> & { settings?: PolicySettings } = {},
): ReturnType<typeof gate> {
  const ty = type(name);
  const { settings, ...rest } = over;
  return gate({
    channel,
    tier,
    type: ty,
    policy: policyFor(ty, tier, settings ?? DEFAULT_SETTINGS),
    prefs,
    timeZone: PARIS,
    nowMs: LATE,
    retryMs: 5 * SECOND,
    ...rest,
  });
}

t.test('gate 1: the transactional tier and mandatory types are sent, whatever the user says', async (t) => {
  const against: PreferenceDoc = {
    types: { order_updates: { email: false }, security_alerts: { push: false } },
    quiet_hours: { start: '22:00', end: '07:00' },
  };
  t.same(gateOf('order_updates', 'transactional', 'email', against), { do: 'send' }, 'off and quiet hours ignored');
  t.same(gateOf('social_activity', 'transactional', 'push', against), { do: 'send' }, 'no cap at transactional');
  t.same(gateOf('security_alerts', 'low', 'push', against), { do: 'send' }, 'mandatory at low');
  t.same(gateOf('security_alerts', 'normal', 'email', 'unavailable'), { do: 'send' }, 'mandatory, preferences unreadable');
  t.same(gateOf('order_updates', 'transactional', 'sms', 'unavailable'), { do: 'send' }, 'transactional sms, preferences unreadable');
});

t.test('gate 2: preferences unreadable: e-mail and SMS held for retryMs, push and in-app go ahead or to the cap', async (t) => {
  t.same(gateOf('order_updates', 'normal', 'email', 'unavailable', { nowMs: NOON, retryMs: 7_500 }), {
    do: 'hold',
    reason: 'preferences_unavailable',
    untilMs: NOON + 7_500,
  });
  t.same(gateOf('order_updates', 'high', 'sms', 'unavailable', { nowMs: NOON }), {
    do: 'hold',
    reason: 'preferences_unavailable',
    untilMs: NOON + 5 * SECOND,
  });
  t.same(gateOf('order_updates', 'high', 'push', 'unavailable'), { do: 'send' });
  t.same(gateOf('order_updates', 'low', 'in_app', 'unavailable'), { do: 'send' }, 'quiet hours unknown: not held');
  t.same(gateOf('social_activity', 'normal', 'push', 'unavailable'), { do: 'cap', rule: { limit: 10, windowMs: HOUR } });
  t.same(gateOf('social_activity', 'high', 'push', 'unavailable'), { do: 'send' }, 'no cap at high');
  t.same(gateOf('marketing', 'low', 'email', 'unavailable', { nowMs: NOON }), {
    do: 'hold',
    reason: 'preferences_unavailable',
    untilMs: NOON + 5 * SECOND,
  });
});

t.test('gate 3: a channel the user turned off is opted out (before quiet hours and caps)', async (t) => {
  const prefs: PreferenceDoc = { types: { marketing: { email: false, push: true } }, quiet_hours: { start: '22:00', end: '07:00' } };
  t.same(gateOf('marketing', 'normal', 'email', prefs), { do: 'opt_out', detail: 'the user turned email off for marketing' });
  t.same(gateOf('marketing', 'high', 'email', prefs, { nowMs: NOON }), {
    do: 'opt_out',
    detail: 'the user turned email off for marketing',
  });
  t.same(
    gateOf('marketing', 'normal', 'push', prefs, { nowMs: NOON }),
    { do: 'cap', rule: { limit: 5, windowMs: HOUR } },
    'on is not off: the cap',
  );
});

t.test("gate 4: inside the user's quiet hours, held until they end on the user's wall clock", async (t) => {
  t.same(gateOf('order_updates', 'normal', 'push', NIGHT), { do: 'hold', reason: 'quiet_hours', untilMs: RELEASE });
  t.same(gateOf('order_updates', 'low', 'email', NIGHT), { do: 'hold', reason: 'quiet_hours', untilMs: RELEASE });
  t.same(
    gateOf('social_activity', 'normal', 'push', NIGHT),
    { do: 'hold', reason: 'quiet_hours', untilMs: RELEASE },
    'quiet hours come before the cap',
  );
  t.same(
    gateOf('order_updates', 'normal', 'push', NIGHT, { nowMs: at('2026-01-16T06:59:30+01:00') }),
    { do: 'hold', reason: 'quiet_hours', untilMs: RELEASE },
    'half a minute before the end',
  );
  t.same(gateOf('order_updates', 'normal', 'push', NIGHT, { nowMs: RELEASE }), { do: 'send' }, 'at the end: outside');
  t.same(gateOf('order_updates', 'normal', 'push', NIGHT, { nowMs: NOON }), { do: 'send' }, 'outside the window');
  t.same(
    gateOf('order_updates', 'normal', 'push', NIGHT, { timeZone: undefined, nowMs: at('2026-01-15T23:30:00Z') }),
    { do: 'hold', reason: 'quiet_hours', untilMs: at('2026-01-16T07:00:00Z') },
    'no zone: UTC',
  );
  t.same(
    gateOf('order_updates', 'normal', 'push', NIGHT, { timeZone: 'America/New_York' }),
    { do: 'send' },
    '23:30 in Paris is 17:30 in New York',
  );
  t.same(gateOf('order_updates', 'normal', 'push', NIGHT, { timeZone: 'Asia/Tokyo', nowMs: at('2026-01-15T23:30:00+09:00') }), {
    do: 'hold',
    reason: 'quiet_hours',
    untilMs: at('2026-01-16T07:00:00+09:00'),
  });
  t.same(
    gateOf(
      'order_updates',
      'normal',
      'push',
      { types: {}, quiet_hours: { start: '13:00', end: '14:00' } },
      { nowMs: at('2026-07-01T13:15:00+02:00') },
    ),
    { do: 'hold', reason: 'quiet_hours', untilMs: at('2026-07-01T14:00:00+02:00') },
    'a window within the day, in summer time',
  );
});

t.test('gate 4: quiet hours are ignored where the policy says so', async (t) => {
  t.same(gateOf('order_updates', 'high', 'push', NIGHT), { do: 'send' }, 'high with the default settings');
  t.same(
    gateOf('order_updates', 'high', 'push', NIGHT, { settings: { quietHoursTiers: ['normal', 'high'] } }),
    { do: 'hold', reason: 'quiet_hours', untilMs: RELEASE },
    'high when the operator adds it',
  );
  t.same(gateOf('order_updates', 'normal', 'push', NIGHT, { settings: { quietHoursTiers: [] } }), { do: 'send' }, 'normal with none');
  t.same(
    gateOf('order_updates', 'low', 'push', NIGHT, { settings: { quietHoursTiers: [] } }),
    { do: 'hold', reason: 'quiet_hours', untilMs: RELEASE },
    'low always',
  );
  t.same(
    gateOf('social_activity', 'normal', 'push', NIGHT, { settings: { quietHoursTiers: [] } }),
    { do: 'cap', rule: { limit: 10, windowMs: HOUR } },
    'no quiet hours: the cap still applies',
  );
});

t.test('gate 4: a malformed stored quiet_hours is ignored', async (t) => {
  const broken: [string, PreferenceDoc['quiet_hours']][] = [
    ['hour 25', { start: '25:00', end: '07:00' }],
    ['no leading zero', { start: '22:00', end: '7:00' }],
    ['12-hour clock', { start: '10pm', end: '07:00' }],
    ['start = end', { start: '22:00', end: '22:00' }],
    ['empty', { start: '', end: '' }],
  ];
  for (const [what, quiet_hours] of broken) {
    t.same(gateOf('order_updates', 'normal', 'push', { types: {}, quiet_hours }), { do: 'send' }, what);
    t.same(
      gateOf('social_activity', 'low', 'push', { types: {}, quiet_hours }),
      { do: 'cap', rule: { limit: 10, windowMs: HOUR } },
      `${what}: on to the cap`,
    );
  }
  t.same(
    gateOf('order_updates', 'normal', 'push', storedPreferences({ types: {}, quiet_hours: { start: 22, end: 7 } })),
    { do: 'send' },
    'numbers are dropped when read back',
  );
});

t.test('gate 5 and 6: the cap decides where the policy caps and the type has a rule; else send', async (t) => {
  t.same(gateOf('social_activity', 'normal', 'push', none, { nowMs: NOON }), { do: 'cap', rule: { limit: 10, windowMs: HOUR } });
  t.same(gateOf('marketing', 'low', 'email', none, { nowMs: NOON }), { do: 'cap', rule: { limit: 3, windowMs: 24 * HOUR } });
  t.same(gateOf('marketing', 'low', 'in_app', none, { nowMs: NOON }), { do: 'send' }, 'no rule for the channel');
  t.same(gateOf('social_activity', 'high', 'push', none, { nowMs: NOON }), { do: 'send' }, 'high: no caps');
  t.same(gateOf('order_updates', 'normal', 'push', none, { nowMs: NOON }), { do: 'send' }, 'a type without caps');
});

t.test('capVerdicts: admit up to the limit counting those already in the window', async (t) => {
  const rule = { limit: 3, windowMs: HOUR };
  const now = at('2026-01-15T12:00:00Z');
  const oldest = now - 20 * 60_000;
  t.same(capVerdicts(5, 1, oldest, rule, now), [
    { admit: true },
    { admit: true },
    { admit: false, freeAtMs: oldest + HOUR },
    { admit: false, freeAtMs: oldest + HOUR },
    { admit: false, freeAtMs: oldest + HOUR },
  ]);
  t.same(
    capVerdicts(4, 0, undefined, rule, now),
    [{ admit: true }, { admit: true }, { admit: true }, { admit: false, freeAtMs: now + HOUR }],
    'none counted before: the refused one frees a window after now',
  );
  t.same(
    capVerdicts(2, 3, oldest, rule, now),
    [
      { admit: false, freeAtMs: oldest + HOUR },
      { admit: false, freeAtMs: oldest + HOUR },
    ],
    'full already',
  );
  t.same(capVerdicts(1, 7, oldest, rule, now), [{ admit: false, freeAtMs: oldest + HOUR }], 'over the limit (a lowered cap)');
  t.same(capVerdicts(2, 2, oldest, rule, now), [{ admit: true }, { admit: false, freeAtMs: oldest + HOUR }]);
  t.same(capVerdicts(3, 0, undefined, rule, now), [{ admit: true }, { admit: true }, { admit: true }], 'exactly the limit');
  t.same(capVerdicts(0, 5, oldest, rule, now), [], 'nothing to judge');
  t.same(capVerdicts(2, 0, undefined, { limit: 1, windowMs: 24 * HOUR }, now), [
    { admit: true },
    { admit: false, freeAtMs: now + 24 * HOUR },
  ]);
});

// ---------------------------------------------------------------------------------------------
// The preferences document
// ---------------------------------------------------------------------------------------------

/** What a PATCH body is refused with: status, code and field (or `"accepted"`). */
function refusal(body: unknown): { status: number; code: string; field: string | undefined; detail: string | undefined } | 'accepted' {
  try {
    parsePreferencePatch(body, catalog);
  } catch (err) {
    if (isPlatformError(err)) return { status: err.status, code: err.code, field: err.field, detail: err.detail };
    throw err;
  }
  return 'accepted';
}

t.test('a PATCH body is refused with 400 invalid_field naming the field', async (t) => {
  const cases: [string, unknown, string][] = [
    ['null body', null, 'body'],
    ['an array body', [{ marketing: { push: false } }], 'body'],
    ['a string body', 'marketing', 'body'],
    ['a number body', 42, 'body'],
    ['an unknown type at the top level', { newsletter: { push: false } }, 'newsletter'],
    ['the stored shape, not the API one', { types: { marketing: { push: false } } }, 'types'],
    ['a type that is not an object', { marketing: true }, 'marketing'],
    ['a type set to null', { marketing: null }, 'marketing'],
    ['a type set to a list', { marketing: ['push'] }, 'marketing'],
    ['an unknown channel', { marketing: { fax: true } }, 'marketing.fax'],
    ['a channel spelled in capitals', { order_updates: { Push: true } }, 'order_updates.Push'],
    ['a string for a boolean', { marketing: { push: 'false' } }, 'marketing.push'],
    ['a number for a boolean', { order_updates: { email: 0 } }, 'order_updates.email'],
    ['turning a mandatory type off', { security_alerts: { push: false } }, 'security_alerts.push'],
    ['turning a mandatory type off by sms', { security_alerts: { sms: false } }, 'security_alerts.sms'],
    ['SMS on for marketing', { marketing: { sms: true } }, 'marketing.sms'],
    ['quiet_hours not an object', { quiet_hours: '22:00-07:00' }, 'quiet_hours'],
    ['quiet_hours a list', { quiet_hours: ['22:00', '07:00'] }, 'quiet_hours'],
    ['an unknown quiet_hours field', { quiet_hours: { start: '22:00', end: '07:00', zone: 'Europe/Paris' } }, 'quiet_hours.zone'],
    ['start missing', { quiet_hours: { end: '07:00' } }, 'quiet_hours.start'],
    ['start 24:00', { quiet_hours: { start: '24:00', end: '07:00' } }, 'quiet_hours.start'],
    ['start without a leading zero', { quiet_hours: { start: '7:00', end: '09:00' } }, 'quiet_hours.start'],
    ['start as a number', { quiet_hours: { start: 2200, end: '07:00' } }, 'quiet_hours.start'],
    ['start null', { quiet_hours: { start: null, end: '07:00' } }, 'quiet_hours.start'],
    ['end missing', { quiet_hours: { start: '22:00' } }, 'quiet_hours.end'],
    ['end 07:60', { quiet_hours: { start: '22:00', end: '07:60' } }, 'quiet_hours.end'],
    ['end with seconds', { quiet_hours: { start: '22:00', end: '07:00:00' } }, 'quiet_hours.end'],
    ['start = end', { quiet_hours: { start: '22:00', end: '22:00' } }, 'quiet_hours.end'],
  ];
  for (const [what, body, field] of cases) {
    const r = refusal(body);
    t.match(r, { status: 400, code: 'invalid_field', field }, what);
    if (r !== 'accepted') t.ok(r.detail?.startsWith(`${field}: `), `${what}: the detail starts with the field`);
  }
  t.same(refusal({ marketing: { sms: true } }), {
    status: 400,
    code: 'invalid_field',
    field: 'marketing.sms',
    detail: 'marketing.sms: marketing is never sent by SMS',
  });
  t.same(refusal({ security_alerts: { push: false } }), {
    status: 400,
    code: 'invalid_field',
    field: 'security_alerts.push',
    detail: 'security_alerts.push: security_alerts cannot be turned off',
  });
  t.same(refusal({ quiet_hours: { start: '22:00', end: '22:00' } }), {
    status: 400,
    code: 'invalid_field',
    field: 'quiet_hours.end',
    detail: 'quiet_hours.end: must differ from quiet_hours.start',
  });
});

t.test('a PATCH body that is accepted', async (t) => {
  t.same(
    parsePreferencePatch(
      { marketing: { push: false, email: null, sms: false }, order_updates: { sms: true }, quiet_hours: { start: '22:00', end: '07:00' } },
      catalog,
    ),
    {
      types: { marketing: { push: false, email: null, sms: false }, order_updates: { sms: true } },
      quietHours: { start: '22:00', end: '07:00' },
    },
  );
  t.same(parsePreferencePatch({ security_alerts: { push: true, email: null } }, catalog), {
    types: { security_alerts: { push: true, email: null } },
  });
  const cleared = parsePreferencePatch({ quiet_hours: null }, catalog);
  t.same(cleared, { types: {}, quietHours: null });
  t.equal(cleared.quietHours, null, 'null, not undefined: remove them');
  const empty = parsePreferencePatch({}, catalog);
  t.same(empty, { types: {} });
  t.notOk('quietHours' in empty, 'no quiet_hours: not touched');
  t.same(
    parsePreferencePatch({ quiet_hours: { start: '00:00', end: '23:59' } }, catalog).quietHours,
    { start: '00:00', end: '23:59' },
    'the extremes',
  );
});

t.test('applyPreferencePatch merges channel by channel; null forgets; an emptied type goes', async (t) => {
  const doc: PreferenceDoc = {
    types: { marketing: { push: false, email: true }, social_activity: { push: false } },
    quiet_hours: { start: '22:00', end: '07:00' },
  };
  const before = structuredClone(doc);

  t.same(applyPreferencePatch(doc, parsePreferencePatch({ marketing: { email: null, in_app: false } }, catalog)), {
    types: { marketing: { push: false, in_app: false }, social_activity: { push: false } },
    quiet_hours: { start: '22:00', end: '07:00' },
  });
  t.same(
    applyPreferencePatch(doc, parsePreferencePatch({ social_activity: { push: null } }, catalog)),
    { types: { marketing: { push: false, email: true } }, quiet_hours: { start: '22:00', end: '07:00' } },
    'the last channel cleared: the type is removed',
  );
  t.same(
    applyPreferencePatch(doc, parsePreferencePatch({ order_updates: { email: null } }, catalog)),
    doc,
    'clearing a channel never set adds no empty type',
  );
  t.same(
    applyPreferencePatch(doc, parsePreferencePatch({ quiet_hours: null }, catalog)),
    { types: { marketing: { push: false, email: true }, social_activity: { push: false } } },
    'quiet_hours: null removes them, types untouched',
  );
  t.notOk('quiet_hours' in applyPreferencePatch(doc, parsePreferencePatch({ quiet_hours: null }, catalog)));
  t.same(
    applyPreferencePatch(doc, parsePreferencePatch({ quiet_hours: { start: '23:00', end: '06:30' } }, catalog)),
    { types: doc.types, quiet_hours: { start: '23:00', end: '06:30' } },
    'replaced whole',
  );
  t.same(
    applyPreferencePatch(doc, parsePreferencePatch({ order_updates: { sms: true } }, catalog)),
    {
      types: { marketing: { push: false, email: true }, social_activity: { push: false }, order_updates: { sms: true } },
      quiet_hours: { start: '22:00', end: '07:00' },
    },
    'a patch leaves untouched types and quiet hours alone',
  );
  t.same(applyPreferencePatch(doc, parsePreferencePatch({}, catalog)), doc, 'an empty patch changes nothing');
  t.same(
    applyPreferencePatch(
      { types: {} },
      parsePreferencePatch({ marketing: { push: false }, quiet_hours: { start: '22:00', end: '07:00' } }, catalog),
    ),
    { types: { marketing: { push: false } }, quiet_hours: { start: '22:00', end: '07:00' } },
    'from nothing',
  );
  t.same(
    applyPreferencePatch({ types: { retired_type: { push: false } } }, parsePreferencePatch({ marketing: { push: false } }, catalog)),
    { types: { retired_type: { push: false }, marketing: { push: false } } },
    'a type the operator removed is kept as stored',
  );
  t.same(doc, before, 'the stored document is not mutated');
});

t.test('preferencesJson: the types at the top level, sorted, beside quiet_hours', async (t) => {
  const doc: PreferenceDoc = {
    types: { social_activity: { push: false }, marketing: { email: true, push: false }, order_updates: { sms: true } },
    quiet_hours: { start: '22:00', end: '07:00' },
  };
  const json = preferencesJson(doc);
  t.same(Object.keys(json), ['marketing', 'order_updates', 'social_activity', 'quiet_hours']);
  t.same(json, {
    marketing: { email: true, push: false },
    order_updates: { sms: true },
    social_activity: { push: false },
    quiet_hours: { start: '22:00', end: '07:00' },
  });
  t.same(preferencesJson({ types: { marketing: { push: false } } }), { marketing: { push: false } });
  t.notOk('quiet_hours' in preferencesJson({ types: {} }));
  t.same(preferencesJson({ types: {} }), {});
  t.same(
    parsePreferencePatch(json, catalog),
    {
      types: { marketing: { email: true, push: false }, order_updates: { sms: true }, social_activity: { push: false } },
      quietHours: { start: '22:00', end: '07:00' },
    },
    'the answer is a valid PATCH body',
  );
});

t.test('storedPreferences reads a stored document back and tolerates junk', async (t) => {
  const doc: PreferenceDoc = { types: { marketing: { push: false } }, quiet_hours: { start: '22:00', end: '07:00' } };
  t.same(storedPreferences(JSON.parse(JSON.stringify(doc))), doc, 'a round trip through JSON');
  const junk: [string, unknown][] = [
    ['null', null],
    ['undefined', undefined],
    ['a string', 'marketing'],
    ['a number', 42],
    ['an array', [doc]],
    ['an empty object', {}],
    ['types as a list', { types: ['marketing'] }],
    ['types as a string', { types: 'marketing' }],
    ['types null', { types: null }],
  ];
  for (const [what, raw] of junk) {
    const got = storedPreferences(raw);
    t.same(got, { types: {} }, what);
    t.notOk('quiet_hours' in got, `${what}: no quiet hours`);
  }
  const badQuiet: [string, unknown][] = [
    ['a string', '22:00-07:00'],
    ['numbers', { start: 22, end: 7 }],
    ['end missing', { start: '22:00' }],
    ['null', null],
    ['a list', ['22:00', '07:00']],
  ];
  for (const [what, quiet_hours] of badQuiet) {
    const got = storedPreferences({ types: { marketing: { push: false } }, quiet_hours });
    t.same(got, { types: { marketing: { push: false } } }, `quiet_hours ${what}: dropped, types kept`);
    t.notOk('quiet_hours' in got);
  }
  t.same(
    storedPreferences({ types: {}, quiet_hours: { start: '22:00', end: '07:00', zone: 'Europe/Paris' } }),
    { types: {}, quiet_hours: { start: '22:00', end: '07:00' } },
    'only start and end are read',
  );
  t.same(
    storedPreferences({ types: {}, quiet_hours: { start: '25:00', end: 'later' } }),
    { types: {}, quiet_hours: { start: '25:00', end: 'later' } },
    'malformed strings are kept as stored (the gate ignores them)',
  );
  t.same(
    storedPreferences({ types: { retired_type: { push: false } } }),
    { types: { retired_type: { push: false } } },
    'a type the operator removed is kept, and never consulted',
  );
  t.same(userChoice(storedPreferences({ types: { marketing: 'off' } }), 'marketing', 'push'), undefined, 'a junk type entry is no choice');
  t.same(userChoice(storedPreferences({ types: { marketing: null } }), 'marketing', 'push'), undefined);
});

t.test('the bounds of caps and digests are inclusive: 1 s to 31 days, 1 s to 1 day, 1 to 100000 and 1 to 1000', async (t) => {
  const c = parseTypeCatalog(
    withSecurity({
      a: { events: ['a.*'], caps: { push: { limit: 1, window: '1s' }, email: { limit: 100_000, window: '31d' } } },
      b: { events: ['b.*'], digest: { window: '1d', template: 'b_v1', max_items: 1000 } },
      c: { events: ['c.*'], digest: { window: '1s', template: 'c_v12', max_items: 1 } },
    }),
  );
  t.same(c.types.get('a')!.caps, { push: { limit: 1, windowMs: SECOND }, email: { limit: 100_000, windowMs: 31 * DAY } });
  t.same(c.types.get('b')!.digest, { windowMs: DAY, template: 'b_v1', maxItems: 1000 });
  t.same(c.types.get('c')!.digest, { windowMs: SECOND, template: 'c_v12', maxItems: 1 });
});

t.test("failover: the first channel of the type's list that the table allows, is configured and the user has an address on", async (t) => {
  const c = parseTypeCatalog(
    withSecurity({
      orders: { events: ['order.*'] },
      quiet: { events: ['quiet.*'], failover: false },
      mail_first: { events: ['mail.*'], failover: { push: ['email', 'in_app'] } },
      marketing: { events: ['promo.*'] },
    }),
  );
  const settings: PolicySettings = { quietHoursTiers: [] };
  const all = (_c: ChannelName): boolean => true;
  const phone = { phone: '+14155550100' };
  const target = (type: string, tier: Tier, from: ChannelName, profile: { email?: string; phone?: string } | undefined, configured = all) =>
    failoverTarget(c.types.get(type)!, tier, from, { settings, configured, profile });
  t.equal(target('orders', 'high', 'push', phone), 'sms', 'push → sms when the user has a phone');
  t.equal(target('orders', 'high', 'push', {}), 'in_app', 'else in_app');
  t.equal(target('orders', 'high', 'push', undefined), 'in_app', 'an unknown profile has no phone');
  t.equal(
    target('orders', 'high', 'push', phone, (ch) => ch !== 'sms'),
    'in_app',
    'no SMS channel configured',
  );
  t.equal(target('orders', 'transactional', 'push', phone), 'sms');
  t.equal(target('orders', 'high', 'email', phone), 'in_app', 'e-mail → in_app');
  t.equal(target('orders', 'high', 'sms', phone), 'in_app', 'sms → in_app');
  t.equal(target('orders', 'high', 'in_app', phone), undefined, 'in_app fails over to nothing');
  t.equal(target('orders', 'normal', 'push', phone), undefined, 'normal never fails over');
  t.equal(target('orders', 'low', 'push', phone), undefined, 'low never fails over');
  t.equal(target('quiet', 'high', 'push', phone), undefined, 'failover: false');
  t.equal(target('mail_first', 'high', 'push', { email: 'a@example.test', ...phone }), 'email', "the type's own order");
  t.equal(target('mail_first', 'high', 'push', phone), 'in_app', 'no e-mail address: the next');
  t.equal(target('mail_first', 'high', 'email', phone), undefined, 'a channel not listed does not fail over');
  t.equal(target('marketing', 'high', 'push', phone), 'in_app', 'marketing never fails over to SMS');
  t.same(DEFAULT_FAILOVER, { push: ['sms', 'in_app'], email: ['in_app'], sms: ['in_app'] });
});
