/**
 * Validation of the ingestion body (README, "Ingestion: `POST /api/v1/notifications`"). Pure.
 *
 * The JSON is read through the one converter (shared/proto-json.ts, strict: unknown fields, wrong
 * types and unknown enum values are refused naming the field), then held to the rules the contract
 * cannot express. Required-ness, which the contract (proto/notify/v1) leaves open, decided here:
 *
 * | field | required | rule |
 * |---|---|---|
 * | `event_type` | yes | `<domain>.<action>`: two dot-separated parts of `a-z 0-9 _ -`, each starting with a letter; ≤ 128 |
 * | `recipient_id` or `audience` | exactly one | `recipient_id`: 1–128 visible ASCII characters; `audience.segment`: a segment id (1–128 visible ASCII characters without `/`; an unknown one is 422 `segment_not_found` at acceptance) |
 * | `template_id` | yes | `<name>_v<N>` (notifier/templates/template-id.ts) |
 * | `template_data` | no (default `{}`) | string values; ≤ 100 keys |
 * | `priority` | yes | `transactional`, `high`, `normal`, `low`: it picks the queue, so guessing would be wrong |
 * | `channels` | no | no repeats; absent or empty = resolved at routing (policy/resolve.ts); each must be allowed for the type × tier (policy/table.ts: SMS only for `transactional` and `high`, or a mandatory type, never for marketing; else 422 `channel_not_allowed`) |
 * | `notification_type` | no | a configured type (policy/types.ts); absent = by `event_type`; 400 naming it when unknown or when no type matches |
 * | `idempotency_key` | no | 1–255 visible ASCII characters; without one a request is never de-duplicated. The `Idempotency-Key` header is the same key (as the OpenAPI document says): either may carry it, both with the same value is one key, both with different values is 422 `idempotency_key_mismatch` |
 * | `locale` | no | a locale (`fr`, `fr_CA`, `fr-CA`); overrides the recipient's profile |
 * | `campaign_id` | with `audience`, yes | 1–128 visible ASCII characters; the kill switch's unit |
 *
 * 400 (`invalid_field`, naming the field) for a malformed request; 422 for a well-formed one the
 * service will not take (`audience_not_allowed`: an audience at the transactional tier;
 * `channel_not_allowed`).
 */
import { createHash } from 'node:crypto';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { enumToJson, fromJson } from '../../shared/proto-json.js';
import { ChannelSchema, NotificationRequestSchema, PrioritySchema } from '../../proto/gen/notify/v1/notify_pb.js';
import { canonicalLocale } from '../templates/locale.js';
import { parseTemplateId } from '../templates/template-id.js';
import { isChannel, isTier, type ChannelName, type Tier } from '../queues/names.js';
import { policyFor, type PolicySettings } from '../policy/table.js';
import type { TypeCatalog } from '../policy/types.js';

/** A validated request, ready to persist. */
export interface NewNotification {
  eventType: string;
  /** Exactly one of recipientId and segment (an audience request: notifier/campaigns). */
  recipientId: string | undefined;
  segment: string | undefined;
  templateId: string;
  templateData: Record<string, string>;
  priority: Tier;
  /** As requested (possibly empty: resolve at routing). */
  channels: ChannelName[];
  idempotencyKey: string | undefined;
  /** Canonical (`fr_CA`). */
  locale: string | undefined;
  campaignId: string | undefined;
  /** The configured type it was classified as. */
  notificationType: string;
}

/** What ingestion checks a request against. */
export interface IngestPolicies {
  catalog: TypeCatalog;
  settings: PolicySettings;
}

const EVENT_TYPE_RE = /^[a-z][a-z0-9_-]*\.[a-z][a-z0-9_-]*$/;
const VISIBLE_RE = /^[\x21-\x7e]+$/;
const MAX_TEMPLATE_KEYS = 100;

function visibleId(field: string, value: string, max: number): string {
  if (value.length === 0) throw invalidField(field, 'must not be empty');
  if (value.length > max) throw invalidField(field, `must be at most ${max} characters`);
  if (!VISIBLE_RE.test(value)) throw invalidField(field, 'must be visible ASCII characters without spaces');
  return value;
}

/**
 * The key an `Idempotency-Key` header carries. The IETF draft (draft-ietf-httpapi-idempotency-key-
 * header) writes it as a structured-field string, `"8e03978e"`, while most clients send it bare,
 * as Stripe does; both are taken, and the quotes are not part of the key, so `"k1"` in the header
 * and `k1` in the body are the same key. Otherwise the body field's rules (1–255 visible ASCII);
 * a repeated header arrives joined with ", " and is refused for its space.
 */
export function idempotencyKeyHeader(raw: string): string {
  const unquoted = /^"([^"\\]*)"$/.exec(raw)?.[1] ?? raw;
  return visibleId('Idempotency-Key', unquoted, 255);
}

/**
 * Validates a decoded JSON body, with the `Idempotency-Key` header's raw value when the request had one.
 * @throws PlatformError `bad_request` | `invalid_field` (400, naming the field) | `audience_not_allowed` | `channel_not_allowed` | `idempotency_key_mismatch` (422)
 */
export function validateNotificationRequest(json: unknown, policies: IngestPolicies, idempotencyHeader?: string): NewNotification {
  const msg = fromJson(NotificationRequestSchema, json);

  if (msg.eventType === '') throw invalidField('event_type', 'is required');
  if (msg.eventType.length > 128) throw invalidField('event_type', 'must be at most 128 characters');
  if (!EVENT_TYPE_RE.test(msg.eventType)) throw invalidField('event_type', 'must be <domain>.<action>, e.g. order.shipped');

  let recipientId: string | undefined;
  let segment: string | undefined;
  if (msg.target.case === 'recipientId') recipientId = visibleId('recipient_id', msg.target.value, 128);
  else if (msg.target.case === 'audience') {
    segment = visibleId('audience.segment', msg.target.value.segment, 128);
    if (segment.includes('/')) throw invalidField('audience.segment', 'must not contain /');
  } else throw invalidField('recipient_id', 'is required (or audience)');

  if (msg.templateId === '') throw invalidField('template_id', 'is required');
  if (!parseTemplateId(msg.templateId)) throw invalidField('template_id', 'must be <name>_v<N>, e.g. order_shipped_v2');

  const keys = Object.keys(msg.templateData);
  if (keys.length > MAX_TEMPLATE_KEYS) throw invalidField('template_data', `must have at most ${MAX_TEMPLATE_KEYS} keys`);
  for (const k of keys) if (k === '') throw invalidField('template_data', 'keys must not be empty');

  const priority = enumToJson(PrioritySchema, msg.priority);
  if (msg.priority === 0 || priority === undefined || !isTier(priority)) {
    throw invalidField('priority', 'is required: transactional, high, normal or low');
  }

  const channels: ChannelName[] = [];
  msg.channels.forEach((c, i) => {
    const name = enumToJson(ChannelSchema, c);
    if (c === 0 || name === undefined || !isChannel(name)) throw invalidField(`channels[${i}]`, 'must be push, in_app, email or sms');
    if (channels.includes(name)) throw invalidField(`channels[${i}]`, `${name} is listed twice`);
    channels.push(name);
  });

  const bodyKey = msg.idempotencyKey === '' ? undefined : visibleId('idempotency_key', msg.idempotencyKey, 255);
  const headerKey = idempotencyHeader === undefined ? undefined : idempotencyKeyHeader(idempotencyHeader);

  let locale: string | undefined;
  if (msg.locale !== undefined) {
    locale = canonicalLocale(msg.locale);
    if (locale === undefined) throw invalidField('locale', 'must be a locale such as fr, fr_CA or fr-CA');
  }
  const campaignId = msg.campaignId === undefined ? undefined : visibleId('campaign_id', msg.campaignId, 128);
  if (segment !== undefined && campaignId === undefined) {
    throw invalidField('campaign_id', 'is required with audience: it is what the kill switch stops');
  }
  const type = policies.catalog.typeOf(msg.eventType, msg.notificationType);
  if (!type) {
    throw invalidField(
      'notification_type',
      msg.notificationType === undefined
        ? `no notification type matches event_type ${msg.eventType}; name one (${[...policies.catalog.types.keys()].join(', ')})`
        : `must be one of ${[...policies.catalog.types.keys()].join(', ')}`,
    );
  }

  // Well-formed; now what this service will not take.
  if (segment !== undefined && priority === 'transactional') {
    throw new PlatformError('audience_not_allowed', {
      field: 'priority',
      detail: 'priority: a transactional notification goes to one recipient_id; send a campaign at high, normal or low',
    });
  }
  const allowed = policyFor(type, priority, policies.settings).allowed;
  channels.forEach((c, i) => {
    if (!allowed.has(c)) {
      throw new PlatformError('channel_not_allowed', {
        field: `channels[${i}]`,
        detail: `channels[${i}]: ${c} is not used for ${type.name} notifications at ${priority} priority (${[...allowed].join(', ')} are)`,
      });
    }
  });

  // Two keys for one request: which one the caller meant cannot be guessed, and taking either
  // could replay (or fail to replay) the wrong earlier request.
  if (headerKey !== undefined && bodyKey !== undefined && headerKey !== bodyKey) {
    throw new PlatformError('idempotency_key_mismatch', {
      field: 'idempotency_key',
      detail: 'idempotency_key: differs from the Idempotency-Key header; send the key in one of them, or the same in both',
    });
  }
  const idempotencyKey = headerKey ?? bodyKey;

  return {
    eventType: msg.eventType,
    recipientId,
    segment,
    templateId: msg.templateId,
    templateData: { ...msg.templateData },
    priority,
    channels,
    idempotencyKey,
    locale,
    campaignId,
    notificationType: type.name,
  };
}

/**
 * The fingerprint of a request for idempotency: sha256 of its canonical form (template_data keys
 * and channels sorted; the idempotency key itself left out), so the same request written with
 * another key order or whitespace is the same request.
 */
export function requestHash(n: NewNotification): string {
  const data: Record<string, string> = {};
  for (const k of Object.keys(n.templateData).sort()) data[k] = n.templateData[k]!;
  const canonical = JSON.stringify([
    n.eventType,
    // A single recipient hashes as before audiences existed (stored keys stay valid).
    n.recipientId ?? { segment: n.segment },
    n.templateId,
    data,
    n.priority,
    [...n.channels].sort(),
    n.locale ?? null,
    n.campaignId ?? null,
    n.notificationType,
  ]);
  return createHash('sha256').update(canonical).digest('hex');
}
