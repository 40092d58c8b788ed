/**
 * The OpenAPI 3.1 document of the notifier's HTTP API, served at `/openapi.json`. Bodies that are
 * contract messages (proto/notify/v1/notify.proto: the request, the 202, the status view, the
 * inbox) are described by the contract itself (shared/openapi.ts); the operator APIs' own JSON is
 * described here, beside the route modules that write it (named in each operation).
 */
import { InboxPageSchema, IngestionResponseSchema, NotificationRequestSchema, StatusViewSchema } from '../proto/gen/notify/v1/notify_pb.js';
import {
  anyObject,
  bool,
  buildDocument,
  int,
  nullableString,
  num,
  obj,
  OPERATIONAL_SCHEMAS,
  operationalOperations,
  protoRequestSchema,
  protoSchemas,
  ref,
  str,
  strings,
  type OperationSpec,
  type Schema,
} from '../shared/openapi.js';
import { CHANNEL_NAMES } from './channels/channel.js';
import { FILTER_STATUSES } from './admin/notifications.js';
import { TIERS } from './queues/names.js';

const channel: Schema = { enum: [...CHANNEL_NAMES] };
const tier: Schema = { enum: [...TIERS] };
const ADMIN = ['notifier-admin'];
const OPERATOR_ERRORS = [400, 401, 403, 503];
const USER_PATH = { user_id: { description: 'The user (the caller themself, or a service role)', example: 'u1' } };
const UUID_EXAMPLE = '00000000-0000-4000-8000-000000000000';
const cursorQuery = (max: number, dflt: number) => ({
  cursor: { description: "The previous page's next_cursor (opaque)" },
  limit: { description: `Items per page (default ${dflt})`, schema: { type: 'integer', minimum: 1, maximum: max } },
});

const adminNotification = obj({
  id: str,
  recipient_id: nullableString,
  segment_id: nullableString,
  caller: { ...str, description: 'The subject that sent it' },
  event_type: str,
  notification_type: nullableString,
  priority: tier,
  template_id: str,
  requested_channels: { type: 'array', items: channel },
  campaign_id: nullableString,
  created_at: { ...num, description: 'Epoch seconds' },
  status_view: ref('notify.v1.StatusView'),
});

const typePolicy = obj({ allowed_channels: { type: 'array', items: channel }, opt_out: bool, caps: bool, quiet_hours: bool, digest: bool });
const notificationType = obj({
  name: str,
  events: strings,
  channels: { type: 'array', items: channel },
  mandatory: bool,
  sms: bool,
  caps: { type: 'object', additionalProperties: obj({ limit: int, window: str }) },
  digest: { oneOf: [{ type: 'null' }, obj({ window: str, template: str, max_items: int })] },
  failover: { type: 'object', additionalProperties: { type: 'array', items: channel } },
  policies: { type: 'object', properties: Object.fromEntries(TIERS.map((t) => [t, typePolicy])), additionalProperties: false },
});

const deadLetter = obj(
  {
    id: str,
    delivery_id: str,
    notification_id: str,
    recipient_id: str,
    template_id: str,
    channel,
    priority: tier,
    reason: str,
    detail: nullableString,
    attempts: int,
    created_at: { ...num, description: 'Epoch seconds' },
    redriven_at: num,
    redriven_by: str,
    delivery_status: str,
  },
  ['redriven_at', 'redriven_by'],
);
const redriveResult = obj(
  { id: str, delivery_id: str, result: { enum: ['redriven', 'already_redriven', 'not_dead_lettered', 'not_found'] } },
  ['delivery_id'],
);

const profileFields = {
  email: str,
  phone: { ...str, description: 'E.164' },
  locale: str,
  timezone: { ...str, description: 'IANA zone' },
  tags: strings,
};
const profileBody = obj(profileFields, Object.keys(profileFields));
const profile = obj(
  {
    user_id: str,
    ...profileFields,
    created_at: { ...num, description: 'Epoch seconds' },
    updated_at: { ...num, description: 'Epoch seconds' },
  },
  Object.keys(profileFields),
);
const device = obj({ token: str, platform: { enum: ['ios', 'android', 'web'] }, created_at: num, updated_at: num });

const open = (description: string): Schema => ({ ...anyObject, description });

const segment = obj(
  {
    id: str,
    kind: { enum: ['list', 'rule'] },
    version: int,
    size: { type: ['integer', 'null'], description: 'Members (null in the list for a rule segment: counted when it is read)' },
    rule: { ...anyObject, description: 'A rule segment: locale, timezone, tags (notifier/segments/rule.ts)' },
    updated_at: { ...str, description: 'ISO 8601' },
    updated_by: nullableString,
  },
  ['rule'],
);
const segmentVersion = obj({
  version: int,
  state: { enum: ['uploading', 'live', 'retired', 'abandoned'] },
  size: int,
  created_by: nullableString,
  created_at: str,
  completed_at: nullableString,
  purged: bool,
});
const campaignSummary = obj({
  campaign_id: str,
  created_at: { ...str, description: 'ISO 8601' },
  stopped_at: nullableString,
  stopped_by: nullableString,
  fanouts: int,
  pending_approval: int,
  recipients: int,
});

const templateSummaryFields = {
  template_id: { ...str, description: '<name>_v<N>' },
  name: str,
  version: int,
  default_locale: str,
  description: str,
  used: { ...bool, description: 'A notification has used it: frozen' },
  used_at: num,
  created_at: num,
  updated_at: num,
  locales: strings,
  channels: { type: 'array', items: channel },
};
const templateSummary = obj(templateSummaryFields, ['description', 'used_at']);
const template = obj(
  {
    ...templateSummaryFields,
    variant_id: { ...str, description: 'Only when one variant was asked for ({template_id}.{locale})' },
    variant_ids: strings,
    variants: { type: 'object', additionalProperties: { ...anyObject, description: 'Per channel: push, email, sms, in_app' } },
  },
  ['description', 'used_at', 'variant_id'],
);
const rampView = obj({
  channel: { enum: ['push', 'email', 'sms'] },
  providers: {
    type: 'array',
    items: obj({ name: str, role: { enum: ['old', 'new', 'secondary'] }, weight_percent: num }, ['weight_percent']),
  },
  shadow_percent: num,
  shadow: { enum: ['validate_only', 'test_recipients', null] },
  updated_by: nullableString,
  updated_at: { type: ['integer', 'null'], description: 'Epoch seconds' },
});
const rampChange = obj({
  id: { type: ['integer', 'string'] },
  weight_percent: num,
  shadow_percent: num,
  previous_weight_percent: num,
  previous_shadow_percent: num,
  changed_by: nullableString,
  changed_at: int,
});

const suppression = obj({
  address: str,
  reason: { enum: ['bounce', 'complaint', 'manual'] },
  detail: nullableString,
  provider: str,
  delivery_id: nullableString,
  created_at: { ...num, description: 'Epoch seconds' },
});

const operations: Record<string, OperationSpec> = {
  // ── sending and tracking ──
  'POST /api/v1/notifications': {
    summary: 'Accept a notification (idempotent per caller and Idempotency-Key): 202 with its id',
    tags: ['notifications'],
    headers: {
      'idempotency-key': {
        description:
          "The idempotency key, as the body's idempotency_key (either, or both with the same value; different values: 422 idempotency_key_mismatch). Repeats with the same key and request answer the first 202",
      },
    },
    body: { schema: protoRequestSchema(NotificationRequestSchema) },
    responses: { '202': { schema: ref('notify.v1.IngestionResponse') } },
    errors: [400, 401, 403, 409, 413, 415, 422, 429, 503],
  },
  'GET /api/v1/notifications/:notification_id/status': {
    summary: 'The status view: per channel its status and why (sender, recipient or a service role)',
    tags: ['notifications'],
    path: { notification_id: { example: UUID_EXAMPLE } },
    responses: { '200': { schema: ref('notify.v1.StatusView') } },
    errors: [401, 404, 503],
  },
  'GET /api/v1/track/open/:file': {
    summary: 'The e-mail open pixel ({delivery_id}.{signature}.gif); always the image',
    tags: ['notifications'],
    security: [],
    path: { file: { example: 'x.y.gif' } },
    responses: { '200': { schema: { type: 'string', contentEncoding: 'binary' }, contentType: 'image/gif' } },
  },
  'POST /api/v1/deliveries/:delivery_id/events': {
    summary: "An app's receipt or open of a delivery",
    tags: ['notifications'],
    path: { delivery_id: { example: UUID_EXAMPLE } },
    body: { schema: obj({ event: { enum: ['received', 'opened'] } }) },
    responses: { '200': { schema: obj({ delivery_id: str, status: str }) } },
    errors: [400, 401, 404, 503],
  },
  'GET /api/v1/users/:user_id/notifications': {
    summary: 'The in-app inbox, newest first',
    tags: ['inbox'],
    path: USER_PATH,
    query: { unread: { schema: { enum: ['true', 'false', '1', '0'] } }, ...cursorQuery(100, 20) },
    responses: { '200': { schema: ref('notify.v1.InboxPage') } },
    errors: OPERATOR_ERRORS,
  },
  'POST /api/v1/users/:user_id/notifications/:id/read': {
    summary: 'Mark an inbox item read',
    tags: ['inbox'],
    path: { ...USER_PATH, id: { example: UUID_EXAMPLE } },
    responses: { '204': {} },
    errors: [401, 403, 404, 503],
  },
  // ── users ──
  'GET /api/v1/users/:user_id/preferences': {
    summary: "The user's preferences document ({} when never set)",
    tags: ['users'],
    path: USER_PATH,
    responses: { '200': { schema: open('Per notification type, per channel on/off; quiet_hours (notifier/preferences/document.ts)') } },
    errors: [401, 403, 503],
  },
  'PATCH /api/v1/users/:user_id/preferences': {
    summary: 'Partly update the preferences; answered once it applies to every send',
    tags: ['users'],
    path: USER_PATH,
    body: { schema: open('The fields to change (notifier/preferences/document.ts)') },
    responses: { '200': { schema: open('The whole stored document') } },
    errors: [400, 401, 403, 415, 503],
  },
  'PUT /api/v1/users/:user_id/profile': {
    summary: "Replace the user's profile (email, phone, locale, timezone, tags)",
    tags: ['users'],
    path: USER_PATH,
    body: { schema: profileBody },
    responses: { '200': { schema: profile }, '201': { schema: profile } },
    errors: [400, 401, 403, 415, 503],
  },
  'GET /api/v1/users/:user_id/profile': {
    summary: "The user's profile",
    tags: ['users'],
    path: USER_PATH,
    responses: { '200': { schema: profile } },
    errors: [401, 403, 404, 503],
  },
  'POST /api/v1/users/:user_id/devices': {
    summary: 'Register a push token (201 new, 200 refreshed)',
    tags: ['users'],
    path: USER_PATH,
    body: { schema: obj({ token: str, platform: { enum: ['ios', 'android', 'web'] } }) },
    responses: { '200': { schema: device }, '201': { schema: device } },
    errors: [400, 401, 403, 415, 503],
  },
  'GET /api/v1/users/:user_id/devices': {
    summary: "The user's push tokens, newest first",
    tags: ['users'],
    path: USER_PATH,
    responses: { '200': { schema: obj({ devices: { type: 'array', items: device } }) } },
    errors: [401, 403, 503],
  },
  'DELETE /api/v1/users/:user_id/devices/:token': {
    summary: 'Unregister a push token (URL-encoded)',
    tags: ['users'],
    path: { ...USER_PATH, token: { example: 'tok' } },
    responses: { '204': {} },
    errors: [401, 403, 404, 503],
  },
  // ── operators: notifications (notifier/admin/notification-routes.ts) ──
  'GET /api/v1/admin/notifications': {
    summary: "Notifications newest first (one user's, or everyone's), filtered, each with its status view",
    tags: ['admin'],
    security: ADMIN,
    query: {
      user_id: { description: "The recipient; without it, everyone's (audience requests included)" },
      notification_type: { description: 'Only this notification type' },
      channel: { description: 'Only those with a delivery on this channel', schema: channel },
      status: {
        description: 'Only those with a delivery in this state (on `channel` when given; queued includes sending and held)',
        schema: { enum: [...FILTER_STATUSES] },
      },
      ...cursorQuery(100, 20),
    },
    responses: { '200': { schema: obj({ notifications: { type: 'array', items: adminNotification }, next_cursor: nullableString }) } },
    errors: OPERATOR_ERRORS,
  },
  'GET /api/v1/admin/notifications/:id': {
    summary: 'One notification with its status view',
    tags: ['admin'],
    security: ADMIN,
    path: { id: { example: UUID_EXAMPLE } },
    responses: { '200': { schema: adminNotification } },
    errors: [401, 403, 404, 503],
  },
  'GET /api/v1/admin/notification-types': {
    summary: 'The notification-type catalogue and its policy per tier',
    tags: ['admin'],
    security: ADMIN,
    responses: { '200': { schema: obj({ notification_types: { type: 'array', items: notificationType } }) } },
    errors: [401, 403],
  },
  // ── operators: dead letters (notifier/admin/routes.ts) ──
  'GET /api/v1/admin/dlq': {
    summary: 'Dead-letter entries, oldest first (all=true includes re-driven ones)',
    tags: ['admin'],
    security: ADMIN,
    query: { channel: { schema: channel }, reason: {}, all: { schema: { enum: ['true', 'false'] } }, ...cursorQuery(500, 50) },
    responses: { '200': { schema: obj({ dead_letters: { type: 'array', items: deadLetter }, next_cursor: str }, ['next_cursor']) } },
    errors: OPERATOR_ERRORS,
  },
  'GET /api/v1/admin/dlq/:id': {
    summary: 'One dead-letter entry',
    tags: ['admin'],
    security: ADMIN,
    path: { id: { example: UUID_EXAMPLE } },
    responses: { '200': { schema: deadLetter } },
    errors: [401, 403, 404, 503],
  },
  'POST /api/v1/admin/dlq': {
    summary: 'Re-drive entries by id, or the oldest open ones of a channel (idempotent)',
    tags: ['admin'],
    security: ADMIN,
    body: { schema: obj({ ids: strings, channel, limit: int }, ['ids', 'channel', 'limit']) },
    responses: { '200': { schema: obj({ results: { type: 'array', items: redriveResult } }) } },
    errors: [400, 401, 403, 415, 503],
  },
  'POST /api/v1/admin/dlq/:id/redrive': {
    summary: 'Re-drive one entry',
    tags: ['admin'],
    security: ADMIN,
    path: { id: { example: UUID_EXAMPLE } },
    responses: { '200': { schema: redriveResult } },
    errors: [401, 403, 404, 503],
  },
  // ── operators: campaigns (notifier/campaigns/routes.ts) ──
  'GET /api/v1/admin/campaigns': {
    summary: 'Campaigns newest first, fan-outs counted by state (pending=true: waiting for approval)',
    tags: ['campaigns'],
    security: ADMIN,
    query: { pending: { schema: { enum: ['true', 'false'] } }, ...cursorQuery(500, 50) },
    responses: { '200': { schema: obj({ campaigns: { type: 'array', items: campaignSummary }, next_cursor: str }, ['next_cursor']) } },
    errors: OPERATOR_ERRORS,
  },
  'GET /api/v1/admin/campaigns/:campaign_id': {
    summary: 'A campaign: totals, each fan-out, the audit trail',
    tags: ['campaigns'],
    security: ADMIN,
    path: { campaign_id: { example: 'spring' } },
    responses: { '200': { schema: open('notifier/campaigns/routes.ts') } },
    errors: [401, 403, 404, 503],
  },
  'POST /api/v1/admin/campaigns/:campaign_id/stop': {
    summary: "The kill switch (idempotent); every live replica's acknowledgement",
    tags: ['campaigns'],
    security: ADMIN,
    path: { campaign_id: { example: 'spring' } },
    body: { schema: obj({ reason: str }, ['reason']), required: false },
    responses: { '200': { schema: open('notifier/campaigns/kill-switch.ts') } },
    errors: [400, 401, 403, 415, 503],
  },
  'POST /api/v1/admin/campaigns/:campaign_id/approve': {
    summary: 'Approve the fan-outs waiting for approval',
    tags: ['campaigns'],
    security: ADMIN,
    path: { campaign_id: { example: 'spring' } },
    body: { schema: obj({ notification_id: str, reason: str }, ['notification_id', 'reason']), required: false },
    responses: { '200': { schema: open('notifier/campaigns/approval.ts') } },
    errors: [400, 401, 403, 404, 409, 415, 503],
  },
  'POST /api/v1/admin/campaigns/:campaign_id/reject': {
    summary: 'Reject the fan-outs waiting for approval',
    tags: ['campaigns'],
    security: ADMIN,
    path: { campaign_id: { example: 'spring' } },
    body: { schema: obj({ notification_id: str, reason: str }, ['notification_id', 'reason']), required: false },
    responses: { '200': { schema: open('notifier/campaigns/approval.ts') } },
    errors: [400, 401, 403, 404, 409, 415, 503],
  },
  // ── operators: segments (notifier/segments/routes.ts) ──
  'PUT /api/v1/admin/segments/:segment_id/members': {
    summary: "Upload a list segment's members as a stream (NDJSON or CSV); switched in when complete",
    tags: ['segments'],
    security: ADMIN,
    path: { segment_id: { example: 'spring-promo' } },
    body: { schema: { type: 'string' }, contentType: 'application/x-ndjson', description: 'Or text/csv: one member a line' },
    responses: { '200': { schema: segment }, '201': { schema: segment } },
    errors: [400, 401, 403, 409, 413, 415, 503],
  },
  'PUT /api/v1/admin/segments/:segment_id': {
    summary: 'Create or change a rule segment',
    tags: ['segments'],
    security: ADMIN,
    path: { segment_id: { example: 'paris-beta' } },
    body: { schema: open('{"kind": "rule", "rule": {...}}') },
    responses: { '200': { schema: segment }, '201': { schema: segment } },
    errors: [400, 401, 403, 409, 415, 503],
  },
  'GET /api/v1/admin/segments': {
    summary: 'Segments in id byte order',
    tags: ['segments'],
    security: ADMIN,
    query: cursorQuery(500, 50),
    responses: { '200': { schema: obj({ segments: { type: 'array', items: segment }, next_cursor: str }, ['next_cursor']) } },
    errors: OPERATOR_ERRORS,
  },
  'GET /api/v1/admin/segments/:segment_id': {
    summary: 'A segment (a rule segment counted now)',
    tags: ['segments'],
    security: ADMIN,
    path: { segment_id: { example: 'spring-promo' } },
    responses: { '200': { schema: segment } },
    errors: [401, 403, 404, 503],
  },
  'GET /api/v1/admin/segments/:segment_id/versions': {
    summary: "A list segment's stored versions, newest first",
    tags: ['segments'],
    security: ADMIN,
    path: { segment_id: { example: 'spring-promo' } },
    query: { limit: { schema: { type: 'integer', minimum: 1 } } },
    responses: { '200': { schema: obj({ segment_id: str, versions: { type: 'array', items: segmentVersion } }) } },
    errors: [400, 401, 403, 404, 503],
  },
  'DELETE /api/v1/admin/segments/:segment_id': {
    summary: 'Delete a segment',
    tags: ['segments'],
    security: ADMIN,
    path: { segment_id: { example: 'spring-promo' } },
    responses: { '204': {} },
    errors: [401, 403, 404, 503],
  },
  // ── operators: e-mail suppressions (notifier/feedback/suppression-routes.ts) ──
  'GET /api/v1/admin/suppressions': {
    summary: 'The e-mail suppression list, oldest first (q: part of the address)',
    tags: ['suppressions'],
    security: ADMIN,
    query: { reason: { schema: { enum: ['bounce', 'complaint', 'manual'] } }, q: {}, ...cursorQuery(500, 50) },
    responses: { '200': { schema: obj({ suppressions: { type: 'array', items: suppression }, next_cursor: str }, ['next_cursor']) } },
    errors: OPERATOR_ERRORS,
  },
  'POST /api/v1/admin/suppressions': {
    summary: 'Suppress an address by hand (reason manual)',
    tags: ['suppressions'],
    security: ADMIN,
    body: { schema: obj({ address: str, detail: str }, ['detail']) },
    responses: { '200': { description: 'Already listed (unchanged)', schema: suppression }, '201': { schema: suppression } },
    errors: [400, 401, 403, 415, 503],
  },
  'GET /api/v1/admin/suppressions/:address': {
    summary: 'One entry',
    tags: ['suppressions'],
    security: ADMIN,
    path: { address: { example: 'a@example.test' } },
    responses: { '200': { schema: suppression } },
    errors: [401, 403, 404, 503],
  },
  'DELETE /api/v1/admin/suppressions/:address': {
    summary: 'Remove an address from the list',
    tags: ['suppressions'],
    security: ADMIN,
    path: { address: { example: 'a@example.test' } },
    responses: { '204': {} },
    errors: [401, 403, 404, 503],
  },
  // ── operators: provider ramp (notifier/ramp/routes.ts) ──
  'GET /api/v1/admin/providers': {
    summary: 'Every ramp-able channel and its providers',
    tags: ['providers'],
    security: ADMIN,
    responses: { '200': { schema: obj({ channels: { type: 'array', items: rampView } }) } },
    errors: [401, 403, 503],
  },
  'GET /api/v1/admin/providers/:channel': {
    summary: "One channel's providers, weights and shadow share",
    tags: ['providers'],
    security: ADMIN,
    path: { channel: { example: 'push' } },
    responses: { '200': { schema: rampView } },
    errors: [400, 401, 403, 404, 503],
  },
  'GET /api/v1/admin/providers/:channel/changes': {
    summary: "The channel's weight changes, newest first",
    tags: ['providers'],
    security: ADMIN,
    path: { channel: { example: 'push' } },
    query: { limit: { schema: { type: 'integer', minimum: 1 } } },
    responses: { '200': { schema: obj({ changes: { type: 'array', items: rampChange } }) } },
    errors: [400, 401, 403, 404, 503],
  },
  'PUT /api/v1/admin/providers/:channel': {
    summary: 'Set the weights of the old and new provider and/or the shadow share',
    tags: ['providers'],
    security: ADMIN,
    path: { channel: { example: 'push' } },
    body: { schema: obj({ weights: { type: 'object', additionalProperties: num }, shadow_percent: num }, ['weights', 'shadow_percent']) },
    responses: { '200': { schema: rampView } },
    errors: [400, 401, 403, 404, 409, 415, 503],
  },
  // ── operators: templates (notifier/templates/routes.ts; role admin or service) ──
  'PUT /api/v1/admin/templates/:template_id': {
    summary: 'Create (201) or replace (200) a template version; frozen once used (409)',
    tags: ['templates'],
    path: { template_id: { example: 'code_v1' } },
    body: { schema: open('{default_locale, variants: {locale: {push, email, sms, in_app}}} (notifier/templates/definition.ts)') },
    responses: { '200': { schema: template }, '201': { schema: template } },
    errors: [400, 401, 403, 409, 415, 503],
  },
  'GET /api/v1/admin/templates/:template_id': {
    summary: 'A version with every variant ({template_id}.{locale}: only that variant)',
    tags: ['templates'],
    path: { template_id: { example: 'code_v1' } },
    responses: { '200': { schema: template } },
    errors: [400, 401, 403, 404, 503],
  },
  'GET /api/v1/admin/templates': {
    summary: 'Template summaries in (name, version) order',
    tags: ['templates'],
    query: { name: {}, ...cursorQuery(200, 50) },
    responses: { '200': { schema: obj({ templates: { type: 'array', items: templateSummary }, next_cursor: str }, ['next_cursor']) } },
    errors: OPERATOR_ERRORS,
  },
  'POST /api/v1/admin/templates/:template_id/render': {
    summary: 'A preview of what a channel would send',
    tags: ['templates'],
    path: { template_id: { example: 'code_v1' } },
    body: {
      schema: obj({ channel, locale: str, template_data: anyObject, items: { type: 'array', items: anyObject }, count: int }, [
        'locale',
        'items',
        'count',
      ]),
    },
    responses: { '200': { schema: open('The rendered message') } },
    errors: [400, 401, 403, 404, 415, 422, 503],
  },
  // ── provider webhooks (notifier/feedback/routes.ts): signed by the provider, no credentials of ours ──
  'POST /api/v1/webhooks/ses': {
    summary: 'Amazon SNS deliveries of SES events (signature verified)',
    tags: ['webhooks'],
    security: [],
    body: { schema: { type: 'string' }, contentType: 'text/plain', description: 'The SNS envelope (or application/json)' },
    responses: { '200': { schema: obj({ result: str }) } },
    errors: [400, 401, 403, 413, 415, 503],
  },
  'POST /api/v1/webhooks/twilio': {
    summary: 'Twilio status callbacks (X-Twilio-Signature verified)',
    tags: ['webhooks'],
    security: [],
    body: { schema: { type: 'string' }, contentType: 'application/x-www-form-urlencoded' },
    responses: { '200': { schema: obj({ result: str }) } },
    errors: [400, 401, 403, 413, 415, 503],
  },
  ...operationalOperations(),
};

export const notifierOpenApi = buildDocument({
  title: 'Notifier',
  version: '1',
  description:
    'Accepts notifications and delivers them over push, e-mail, SMS and in-app; the inbox, preferences, profiles and devices; the operator APIs (README, "Notifications"). Callers normally arrive through the sidecar, which vouches for them; a bearer access token is accepted directly too. Errors are application/problem+json naming the field at fault.',
  securitySchemes: {
    sidecar: {
      type: 'apiKey',
      in: 'header',
      name: 'X-Subject-Secret',
      description: 'Set by the sidecar (= SERVICE_SECRET) with X-Subject and X-Subject-Role, after it checked the API key or access token',
    },
    bearer: { type: 'http', scheme: 'bearer', description: 'An access token of identity' },
    'notifier-admin': {
      type: 'http',
      scheme: 'bearer',
      description: 'An access token (or the sidecar vouching for a caller) with one of NOTIFIER_ADMIN_ROLES (default admin)',
    },
  },
  security: ['sidecar', 'bearer'],
  schemas: {
    ...protoSchemas(IngestionResponseSchema, StatusViewSchema, InboxPageSchema),
    ...OPERATIONAL_SCHEMAS,
  },
  operations,
});
