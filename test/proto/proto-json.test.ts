// @tier: pure
/**
 * The converter's rules (shared/proto-json.ts): enum naming, numbers, defaults, presence, and a
 * PlatformError `invalid_field` naming the bad field for every kind of bad input.
 */
import t from 'tap';
import type { Test } from 'tap';
import { create } from '@bufbuild/protobuf';
import type { DescMessage } from '@bufbuild/protobuf';
import { PlatformError } from '../../shared/errors.js';
import { checkJson, enumFromJson, enumJsonNames, enumToJson, fromJson, fromJsonString, toJson } from '../../shared/proto-json.js';
import { AccessTokenClaimsSchema, Role } from '../../proto/gen/identity/v1/identity_pb.js';
import {
  Channel,
  ChannelSchema,
  InboxPageSchema,
  NotificationRequestSchema,
  Priority,
  PrioritySchema,
  PreferencesSchema,
} from '../../proto/gen/notify/v1/notify_pb.js';
import {
  Algorithm,
  AlgorithmSchema,
  DecisionEventSchema,
  FailMode,
  QuotaSchema,
  RouteRuleSchema,
  SnapshotSchema,
} from '../../proto/gen/quota/v1/quota_pb.js';
import { contractFiles } from './files.js';

/** Both fromJson and checkJson (its checks alone) refuse `json` alike. */
function rejects(t: Test, schema: DescMessage, json: unknown, field: string, detail: RegExp): void {
  for (const [name, read] of [
    ['fromJson', fromJson],
    ['checkJson', checkJson],
  ] as const) {
    try {
      read(schema, json);
      t.fail(`${name} accepted ${JSON.stringify(json)}`);
    } catch (err) {
      t.ok(err instanceof PlatformError, 'a PlatformError');
      const e = err as PlatformError;
      t.equal(e.code, 'invalid_field', `${name}: code for ${JSON.stringify(json)}`);
      t.equal(e.field, field, 'names the field');
      t.match(e.detail, detail, 'says what is wrong');
    }
  }
}

t.test('enum values: lowercase .proto name without the enum prefix, both ways, for every enum', async (t) => {
  t.equal(enumToJson(AlgorithmSchema, Algorithm.TOKEN_BUCKET), 'token_bucket');
  t.equal(enumToJson(PrioritySchema, Priority.TRANSACTIONAL), 'transactional');
  t.equal(enumToJson(ChannelSchema, Channel.IN_APP), 'in_app');
  t.equal(enumFromJson(AlgorithmSchema, 'fixed_window'), Algorithm.FIXED_WINDOW);
  t.equal(enumFromJson(AlgorithmSchema, 'FIXED_WINDOW'), undefined, 'case matters');
  t.equal(enumFromJson(AlgorithmSchema, 'unspecified'), undefined, 'the zero value is not a name users give');
  t.strictSame(enumJsonNames(ChannelSchema), ['push', 'in_app', 'email', 'sms']);
  for (const file of contractFiles) {
    for (const e of file.enums) {
      for (const v of e.values) {
        const name = enumToJson(e, v.number);
        t.ok(e.sharedPrefix, `${e.typeName}: every value carries the enum's prefix`);
        t.equal(name, v.name.toLowerCase().slice(e.sharedPrefix?.length), `${v.name} is "${name}"`);
        if (v.number !== 0) t.equal(enumFromJson(e, name ?? ''), v.number, `"${name}" reads back`);
      }
    }
  }
});

t.test('64-bit integers are JSON numbers; times are float epoch seconds', async (t) => {
  const snap = create(SnapshotSchema, { version: 2n ** 40n, baseVersion: 7n, issuedAt: 1718035200.125 });
  const json = toJson(SnapshotSchema, snap);
  t.equal(json.version, 2 ** 40);
  t.equal(json.base_version, 7);
  t.equal(json.issued_at, 1718035200.125);
  t.equal(fromJson(SnapshotSchema, { version: 2 ** 40 }).version, 2n ** 40n);
  t.throws(
    () => toJson(SnapshotSchema, create(SnapshotSchema, { version: 2n ** 60n })),
    /not a safe integer/,
    'a version JSON cannot carry exactly',
  );
  t.throws(() => toJson(DecisionEventSchema, create(DecisionEventSchema, { ts: Number.NaN })), /ts = NaN is not a finite number/);
});

t.test('complete records by default: zero values written, unset presence fields and zero enums omitted', async (t) => {
  t.strictSame(toJson(DecisionEventSchema, create(DecisionEventSchema, { subjectId: 'tenant:a', allowed: false, remaining: 0, ts: 1 })), {
    subject_id: 'tenant:a',
    allowed: false,
    remaining: 0,
    ts: 1,
  });
  t.strictSame(toJson(InboxPageSchema, create(InboxPageSchema)), { notifications: [] }, 'an empty page still has its list');
  t.strictSame(toJson(RouteRuleSchema, create(RouteRuleSchema, { pathPrefix: '/v1', burst: 0 })), {
    path_prefix: '/v1',
    methods: [],
    cost: 0,
    burst: 0,
  });
  const q = toJson(QuotaSchema, create(QuotaSchema, { subjectId: 'plan:free', rate: 1 }));
  t.notOk('algorithm' in q, 'algorithm unspecified is omitted');
  t.notOk('fail_mode' in q, 'fail_mode unspecified is omitted');
  t.equal(q.shadow, false);
  t.strictSame(toJson(QuotaSchema, create(QuotaSchema, { rate: 1, failMode: FailMode.OPEN }), { emitDefaults: false }), {
    rate: 1,
    fail_mode: 'open',
  });
});

t.test('oneof members appear under their own names', async (t) => {
  const byRecipient = fromJson(NotificationRequestSchema, { recipient_id: 'u1' });
  t.strictSame(byRecipient.target, { case: 'recipientId', value: 'u1' });
  const bySegment = fromJson(NotificationRequestSchema, { audience: { segment: 'vip' } });
  t.equal(bySegment.target.case, 'audience');
  t.strictSame(toJson(NotificationRequestSchema, bySegment, { emitDefaults: false }), { audience: { segment: 'vip' } });
});

t.test('null means absent', async (t) => {
  const msg = fromJson(NotificationRequestSchema, { recipient_id: 'u1', locale: null, priority: null });
  t.equal(msg.locale, undefined);
  t.equal(msg.priority, Priority.UNSPECIFIED);
});

t.test('a bad enum value names the field and lists the allowed values', async (t) => {
  rejects(
    t,
    QuotaSchema,
    { algorithm: 'sliding_log' },
    'algorithm',
    /^algorithm: must be one of token_bucket, sliding_window, leaky_bucket, fixed_window$/,
  );
  rejects(t, QuotaSchema, { algorithm: 'unspecified' }, 'algorithm', /must be one of/);
  rejects(t, QuotaSchema, { algorithm: 1 }, 'algorithm', /must be one of/);
  rejects(t, NotificationRequestSchema, { priority: 'urgent' }, 'priority', /transactional, high, normal, low/);
  rejects(t, NotificationRequestSchema, { channels: ['push', 'fax'] }, 'channels[1]', /push, in_app, email, sms/);
  rejects(t, SnapshotSchema, { quotas: [{}, { fail_mode: 'maybe' }] }, 'quotas[1].fail_mode', /open, closed/);
  rejects(t, AccessTokenClaimsSchema, { role: 'root' }, 'role', /customer, support, admin, service/);
});

t.test('a wrong type names the field', async (t) => {
  rejects(t, QuotaSchema, { rate: '100' }, 'rate', /must be an integer from 0 to 4294967295/);
  rejects(t, QuotaSchema, { rate: 1.5 }, 'rate', /must be an integer/);
  rejects(t, QuotaSchema, { burst: -1 }, 'burst', /must be an integer/);
  rejects(t, QuotaSchema, { burst: 2 ** 32 }, 'burst', /must be an integer/);
  rejects(t, QuotaSchema, { version: '42' }, 'version', /must be an integer from 0 to 9007199254740991/);
  rejects(t, QuotaSchema, { subject_id: 42 }, 'subject_id', /must be a string/);
  rejects(t, QuotaSchema, { shadow: 'true' }, 'shadow', /must be a boolean/);
  rejects(t, QuotaSchema, { updated_at: '1718035200' }, 'updated_at', /must be a number/);
  rejects(t, QuotaSchema, { routes: {} }, 'routes', /must be an array/);
  rejects(t, QuotaSchema, { routes: ['/v1'] }, 'routes[0]', /must be an object/);
  rejects(t, QuotaSchema, { routes: [{ methods: [1] }] }, 'routes[0].methods[0]', /must be a string/);
  rejects(t, NotificationRequestSchema, { audience: 'vip' }, 'audience', /must be an object/);
  rejects(t, NotificationRequestSchema, { template_data: ['a'] }, 'template_data', /must be an object/);
  rejects(t, NotificationRequestSchema, { template_data: { amount: 12.5 } }, 'template_data.amount', /must be a string/);
  rejects(t, PreferencesSchema, { marketing: { push: 'no' } }, 'marketing.push', /must be a boolean/);
});

t.test('unknown fields, camelCase names and two oneof members are refused', async (t) => {
  rejects(t, QuotaSchema, { subjectId: 'key:x' }, 'subjectId', /unknown field/);
  rejects(t, QuotaSchema, { routes: [{ prefix: '/v1' }] }, 'routes[0].prefix', /unknown field/);
  rejects(t, PreferencesSchema, { reminders: { push: true } }, 'reminders', /unknown field/);
  rejects(
    t,
    NotificationRequestSchema,
    { recipient_id: 'u1', audience: { segment: 'vip' } },
    'audience',
    /only one of recipient_id, audience/,
  );
  const claims = fromJson(
    AccessTokenClaimsSchema,
    { sub: 'u1', role: 'admin', client_id: 'cli', email: 'a@b.c' },
    { ignoreUnknownFields: true },
  );
  t.equal(claims.role, Role.ADMIN, 'ignoreUnknownFields skips extra claims');
});

t.test('the body must be a JSON object; JSON text must parse', async (t) => {
  for (const body of [null, [], 'x', 1]) {
    t.throws(() => fromJson(QuotaSchema, body), { code: 'bad_request' }, JSON.stringify(body));
    t.throws(() => checkJson(QuotaSchema, body), { code: 'bad_request' }, `checkJson ${JSON.stringify(body)}`);
  }
  t.equal(checkJson(QuotaSchema, { rate: 5, routes: [{ methods: ['GET'] }] }), undefined, 'checkJson accepts what fromJson does');
  t.throws(() => fromJsonString(QuotaSchema, '{"rate":'), { code: 'invalid_json' });
  t.equal(fromJsonString(QuotaSchema, '{"rate":5}').rate, 5);
});
