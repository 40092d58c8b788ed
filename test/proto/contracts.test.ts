// @tier: pure
/**
 * Round trips of every message in the contracts, binary and JSON: a message with every field set
 * (each oneof member in turn) and an empty one must come back equal.
 */
import t from 'tap';
import { create, equals, fromBinary, ScalarType, toBinary } from '@bufbuild/protobuf';
import type { DescField, DescMessage, Message } from '@bufbuild/protobuf';
import { reflect } from '@bufbuild/protobuf/reflect';
import type { ReflectList, ReflectMap, ReflectMessage } from '@bufbuild/protobuf/reflect';
import { fromJson, fromJsonString, toJson, toJsonString } from '../../shared/proto-json.js';
import { contractFiles } from './files.js';

function scalarValue(type: ScalarType, seed: number): unknown {
  switch (type) {
    case ScalarType.STRING:
      return `s${seed}-ü`;
    case ScalarType.BOOL:
      return true;
    case ScalarType.DOUBLE:
      return 1718035200.125 + seed;
    case ScalarType.FLOAT:
      return 0.5 + seed;
    case ScalarType.BYTES:
      return new Uint8Array([seed, 255, 0]);
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      // Beyond 32 bits, still exact as a JSON number.
      return BigInt(2 ** 40 + seed);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      // Beyond the int32 range.
      return 4_000_000_000 + seed;
    default:
      return -7 - seed;
  }
}

function enumValue(field: DescField, seed: number): number {
  if (field.enum === undefined) throw new Error(`${field.toString()} is not an enum field`);
  const values = field.enum.values.filter((v) => v.number !== 0);
  return values[seed % values.length]!.number;
}

/** A message with every field set to a non-zero value; `variant` picks the oneof member. */
function populate(desc: DescMessage, variant: number, depth = 0): ReflectMessage {
  const r = reflect(desc);
  let seed = depth * 100;
  for (const f of desc.fields) {
    seed++;
    if (f.oneof !== undefined && f.oneof.fields[variant % f.oneof.fields.length] !== f) continue;
    switch (f.fieldKind) {
      case 'scalar':
        r.set(f, scalarValue(f.scalar, seed));
        break;
      case 'enum':
        r.set(f, enumValue(f, seed));
        break;
      case 'message':
        r.set(f, populate(f.message, variant, depth + 1));
        break;
      case 'list': {
        const list: ReflectList = r.get(f);
        for (let i = 0; i < 2; i++) {
          if (f.listKind === 'scalar') list.add(scalarValue(f.scalar, seed + i));
          else if (f.listKind === 'enum') list.add(enumValue(f, seed + i));
          else list.add(populate(f.message, variant + i, depth + 1));
        }
        break;
      }
      case 'map': {
        const map: ReflectMap = r.get(f);
        for (let i = 0; i < 2; i++) {
          const key = `k${i}`;
          if (f.mapKind === 'scalar') map.set(key, scalarValue(f.scalar, seed + i));
          else if (f.mapKind === 'enum') map.set(key, enumValue(f, seed + i));
          else map.set(key, populate(f.message, variant + i, depth + 1));
        }
        break;
      }
    }
  }
  return r;
}

const messages = contractFiles.flatMap((file) => file.messages);

t.test('the contracts declare the messages the services build on', async (t) => {
  const names = new Set(messages.map((m) => m.typeName));
  for (const name of ['quota.v1.Quota', 'quota.v1.Snapshot', 'notify.v1.NotificationRequest', 'identity.v1.AccessTokenClaims']) {
    t.ok(names.has(name), name);
  }
});

for (const desc of messages) {
  t.test(desc.typeName, async (t) => {
    const variants = Math.max(1, ...desc.oneofs.map((o) => o.fields.length));
    const samples: [string, Message][] = [['empty', create(desc)]];
    for (let v = 0; v < variants; v++) samples.push([`populated #${v}`, populate(desc, v).message]);
    for (const [label, msg] of samples) {
      const binary = fromBinary(desc, toBinary(desc, msg));
      t.ok(equals(desc, binary, msg), `${label}: binary round trip`);
      const json = toJson(desc, msg);
      t.ok(equals(desc, fromJson(desc, json), msg), `${label}: JSON round trip`);
      t.ok(equals(desc, fromJsonString(desc, toJsonString(desc, msg)), msg), `${label}: JSON text round trip`);
      const compact = toJson(desc, msg, { emitDefaults: false });
      t.ok(equals(desc, fromJson(desc, compact), msg), `${label}: compact JSON round trip`);
      if (label !== 'empty' && desc.fields.length > 0) t.ok(Object.keys(json).length > 0, `${label}: JSON is not empty`);
    }
  });
}
