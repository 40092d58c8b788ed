/**
 * Whether a stored event may be given to a projector: the one check of a payload's shape, per event
 * type, that every projection path runs before a projector sees the event (the live consumer and a
 * rebuild in consumer.ts, a re-drive in dead-letters.ts). An event it refuses is dead-lettered at
 * once (retrying cannot change a stored fact) and stays dead-lettered on every re-drive until a
 * build reads it differently (an upcaster in catalog.ts: see the README, "Bad events").
 *
 * The rule of each type is its proto message in the catalogue, read strictly for what is there and
 * leniently for what is not:
 * - a payload that is not a JSON object (null, an array, a scalar) is refused;
 * - a field of the contract present with the wrong JSON type (a string `total`, an object where
 *   the list `items` goes, an item `quantity` of -1 or 1.5) is refused, naming the field;
 * - a missing field passes, and so does one that is JSON `null` (proto JSON reads null as absent):
 *   seed 002 asks handlers to tolerate missing fields, and they do;
 * - a field the contract does not know passes: only a newer writer can have stored one, and
 *   refusing it would dead-letter a newer build's events during a rolling deploy;
 * - an event type the catalogue does not know passes: projectors pass over such events.
 *
 * It runs after upcasting, so it judges the payload readers would see. Pure.
 */
import { checkJson } from '../../shared/proto-json.js';
import { isPlatformError } from '../../shared/errors.js';
import { EVENT_CATALOG, isEventType, type EventCatalog } from './catalog.js';
import type { RecordedEvent } from './event-store.js';

/** The dead-letter error of a payload that is not a JSON object. */
export const NOT_AN_OBJECT = 'the stored payload is not a JSON object';

/**
 * Why `event` must not be projected, or undefined when it may be. The reason is what the dead
 * letter records: `the stored payload does not fit OrderPlaced: total: must be a number`.
 */
export function payloadProblem(
  event: Pick<RecordedEvent, 'type' | 'data' | 'malformed'>,
  catalog: EventCatalog = EVENT_CATALOG,
): string | undefined {
  if (event.malformed) return NOT_AN_OBJECT;
  if (!isEventType(event.type)) return undefined;
  try {
    checkJson(catalog[event.type].schema, event.data, { ignoreUnknownFields: true });
    return undefined;
  } catch (err) {
    if (isPlatformError(err) && err.code === 'invalid_field')
      return `the stored payload does not fit ${event.type}: ${err.detail ?? err.message}`;
    // `bad_request` (not an object) cannot happen past `malformed`; anything else is a bug here.
    throw err;
  }
}
