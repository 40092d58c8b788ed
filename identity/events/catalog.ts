/**
 * The catalogue of event types the identity service writes: each type's proto message (the shape
 * of its stored JSON), its current schema version, and the upcasters that bring older stored
 * versions up to it on read.
 *
 * Versioning rule: a stored event is never rewritten. When a payload changes shape, its schema
 * version goes up by one and an upcaster from the previous version is added here; readers
 * (aggregates, projectors, replays) only ever see the current version. Every stored version has a
 * frozen fixture under test/identity/events/fixtures/, and a test fails when one is missing.
 */
import type { DescMessage } from '@bufbuild/protobuf';
import {
  InventoryReservedSchema,
  OrderCancelledSchema,
  OrderDeletedSchema,
  OrderDeliveredSchema,
  OrderModifiedSchema,
  OrderPlacedSchema,
  OrderRefundedSchema,
  OrderShippedSchema,
  PaymentProcessedSchema,
  RefreshTokenReuseDetectedSchema,
  UserEmailUpdatedSchema,
  UserFollowedUserSchema,
  UserProfilePicUpdatedSchema,
  UserRegisteredSchema,
} from '../../proto/gen/identity/v1/identity_pb.js';
import type { JsonRecord } from '../../shared/proto-json.js';
import type { EventType } from './event-data.js';

/** Turns the stored JSON of version n into the JSON of version n + 1. Pure; tolerant of missing fields. */
export type Upcaster = (data: JsonRecord) => JsonRecord;

export interface EventSpec {
  /** The proto message whose JSON mapping the current version stores. */
  readonly schema: DescMessage;
  /** The schema version new events are written with. */
  readonly version: number;
  /** Which aggregate's streams carry it. */
  readonly stream: 'user' | 'order';
  /** `upcasters[i]` turns version i + 1 into version i + 2; length is `version - 1`. */
  readonly upcasters: readonly Upcaster[];
}

/**
 * UserRegistered v1 is the shape the first prototype of the accounts service stored, before the
 * proto contract existed: `full_name` instead of `name`, and `registered_at` as an ISO-8601 string
 * instead of `created_at` in epoch seconds. v2 is the proto message.
 */
export const userRegisteredV1toV2: Upcaster = (v1) => {
  const { full_name: fullName, registered_at: registeredAt, ...rest } = v1;
  const parsed = typeof registeredAt === 'string' ? Date.parse(registeredAt) : NaN;
  return {
    ...rest,
    name: typeof fullName === 'string' ? fullName : typeof rest.name === 'string' ? rest.name : '',
    created_at: Number.isFinite(parsed) ? parsed / 1000 : typeof rest.created_at === 'number' ? rest.created_at : 0,
  };
};

const spec = (schema: DescMessage, stream: EventSpec['stream'], upcasters: readonly Upcaster[] = []): EventSpec =>
  Object.freeze({ schema, stream, upcasters, version: upcasters.length + 1 });

/** Event type → its spec. The service reads with {@link EVENT_CATALOG}; an event store can be given another (a later build's). */
export type EventCatalog = Readonly<Record<EventType, EventSpec>>;

export const EVENT_CATALOG: EventCatalog = Object.freeze({
  UserRegistered: spec(UserRegisteredSchema, 'user', [userRegisteredV1toV2]),
  UserEmailUpdated: spec(UserEmailUpdatedSchema, 'user'),
  UserProfilePicUpdated: spec(UserProfilePicUpdatedSchema, 'user'),
  UserFollowedUser: spec(UserFollowedUserSchema, 'user'),
  // A security alert about a user (README, "Tokens", refresh rotation); appended to the user's
  // stream, no state change.
  RefreshTokenReuseDetected: spec(RefreshTokenReuseDetectedSchema, 'user'),
  OrderPlaced: spec(OrderPlacedSchema, 'order'),
  PaymentProcessed: spec(PaymentProcessedSchema, 'order'),
  InventoryReserved: spec(InventoryReservedSchema, 'order'),
  OrderShipped: spec(OrderShippedSchema, 'order'),
  OrderDelivered: spec(OrderDeliveredSchema, 'order'),
  OrderCancelled: spec(OrderCancelledSchema, 'order'),
  OrderRefunded: spec(OrderRefundedSchema, 'order'),
  OrderModified: spec(OrderModifiedSchema, 'order'),
  OrderDeleted: spec(OrderDeletedSchema, 'order'),
});

export const EVENT_TYPES = Object.freeze(Object.keys(EVENT_CATALOG) as EventType[]);

export function isEventType(type: string): type is EventType {
  return Object.hasOwn(EVENT_CATALOG, type);
}

/** The event types whose streams belong to orders (the order timeline keeps every one). */
export const ORDER_EVENT_TYPES: ReadonlySet<EventType> = new Set(EVENT_TYPES.filter((t) => EVENT_CATALOG[t].stream === 'order'));
