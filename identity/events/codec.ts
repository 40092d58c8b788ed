/**
 * Between domain events and stored rows. Writing goes through the proto contract (shared/proto-json:
 * strict on the way in, complete records on the way out), so nothing off-contract is ever stored.
 * Reading upcasts older schema versions to the current one and does not validate: stored events
 * are facts. What a projector may be given is checked after upcasting, in payload-check.ts.
 */
import { fromJson, toJson, type JsonRecord } from '../../shared/proto-json.js';
import { EVENT_CATALOG, isEventType, type EventCatalog } from './catalog.js';
import type { DomainEvent } from './event-data.js';

/** An event as handed to the store: type, schema version and JSON payload. */
export interface EncodedEvent {
  readonly type: string;
  readonly schemaVersion: number;
  readonly data: JsonRecord;
}

/**
 * The stored form of a domain event at its current schema version.
 *
 * @throws PlatformError `invalid_field` when the payload does not fit its proto message (a bug in
 *   the aggregate that produced it).
 */
export function encodeEvent(event: DomainEvent): EncodedEvent {
  const spec = EVENT_CATALOG[event.type];
  const message = fromJson(spec.schema, event.data);
  return { type: event.type, schemaVersion: spec.version, data: toJson(spec.schema, message) };
}

/**
 * Brings a stored payload of `schemaVersion` up to its type's current version in `catalog`. Unknown
 * types (from a newer writer) and versions newer than this build knows are returned as they are.
 */
export function upcast(
  type: string,
  schemaVersion: number,
  data: JsonRecord,
  catalog: EventCatalog = EVENT_CATALOG,
): { schemaVersion: number; data: JsonRecord } {
  if (!isEventType(type)) return { schemaVersion, data };
  const spec = catalog[type];
  let version = schemaVersion;
  let out = data;
  while (version < spec.version) {
    const step = spec.upcasters[version - 1];
    if (step === undefined) break;
    out = step(out);
    version++;
  }
  return { schemaVersion: version, data: out };
}
