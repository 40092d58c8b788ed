// @tier: pure
/**
 * Every request and event example in fixtures/seed-*.json (one file per service), written as JSON, goes
 * through the converter (shared/proto-json.ts) and must come back unchanged: same snake_case names,
 * same lowercase enum strings, numbers as numbers.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import type { DescMessage } from '@bufbuild/protobuf';
import { fromJson, fromJsonString, toJson, toJsonString } from '../../shared/proto-json.js';
import { file_identity_v1_identity } from '../../proto/gen/identity/v1/identity_pb.js';
import { file_notify_v1_notify } from '../../proto/gen/notify/v1/notify_pb.js';
import { messageByName } from './files.js';
import { sourceUrl } from '../harness/source.js';

interface Example {
  name: string;
  message: string;
  /** false for request bodies that omit fields (compare in proto3's compact form). */
  emit_defaults?: boolean;
  json: Record<string, unknown>;
}

const seeds = ['seed-000-notifier.json', 'seed-001-limiter.json', 'seed-002-identity.json'];
const examples = new Map<string, Example[]>();
for (const file of seeds) {
  examples.set(file, JSON.parse(readFileSync(new URL(`./fixtures/${file}`, sourceUrl(import.meta.url)), 'utf8')) as Example[]);
}

for (const [file, list] of examples) {
  t.test(file, async (t) => {
    for (const ex of list) {
      t.test(ex.name, async (t) => {
        const schema = messageByName(ex.message);
        const options = { emitDefaults: ex.emit_defaults ?? true };
        const msg = fromJson(schema, ex.json);
        t.strictSame(toJson(schema, msg, options), ex.json, 'JSON value round trip');
        const again = fromJsonString(schema, toJsonString(schema, msg, options));
        t.strictSame(toJson(schema, again, options), ex.json, 'JSON text round trip');
      });
    }
  });
}

/** Message types that occur in a JSON example, nested ones included. */
function typesIn(schema: DescMessage, json: unknown, into: Set<string>): void {
  into.add(schema.typeName);
  if (typeof json !== 'object' || json === null) return;
  for (const f of schema.fields) {
    const value = (json as Record<string, unknown>)[f.name];
    if (value === undefined) continue;
    if (f.fieldKind === 'message') typesIn(f.message, value, into);
    if (f.fieldKind === 'list' && f.listKind === 'message') for (const v of value as unknown[]) typesIn(f.message, v, into);
    if (f.fieldKind === 'map' && f.mapKind === 'message') for (const v of Object.values(value as object)) typesIn(f.message, v, into);
  }
}

t.test('every message users see has a seed example', async (t) => {
  const covered = new Set<string>();
  for (const list of examples.values()) for (const ex of list) typesIn(messageByName(ex.message), ex.json, covered);
  // notify.v1 and identity.v1 are all HTTP/JSON-facing; of quota.v1, the record, its route rules,
  // snapshots (the standalone quota file) and decision events are (the rest is the gRPC API).
  const required = [
    ...file_notify_v1_notify.messages.map((m) => m.typeName),
    ...file_identity_v1_identity.messages.map((m) => m.typeName),
    'quota.v1.Quota',
    'quota.v1.RouteRule',
    'quota.v1.Snapshot',
    'quota.v1.DecisionEvent',
  ];
  t.strictSame(
    required.filter((name) => !covered.has(name)),
    [],
    'messages without an example',
  );
});

t.test('the seed 002 domain events each have an example under their own name', async (t) => {
  const names = new Set(examples.get('seed-002-identity.json')!.map((ex) => ex.name));
  for (const event of [
    'UserRegistered',
    'UserEmailUpdated',
    'UserProfilePicUpdated',
    'UserFollowedUser',
    'OrderPlaced',
    'PaymentProcessed',
    'InventoryReserved',
    'OrderShipped',
    'OrderDelivered',
  ]) {
    t.ok(names.has(event), event);
  }
});
