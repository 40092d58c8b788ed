/**
 * The one converter between the protobuf contracts (proto/, generated under proto/gen) and the JSON
 * users see and we store. Every service reads and writes JSON through it, so the wire keeps the
 * contracts' names and values (the examples in test/proto/fixtures/ round-trip unchanged):
 *
 * - field names are the .proto names (snake_case): `subject_id`, `template_data`;
 * - enum values are lowercase strings without the enum's prefix: `ALGORITHM_TOKEN_BUCKET` is
 *   `"token_bucket"`, `PRIORITY_TRANSACTIONAL` is `"transactional"`, `CHANNEL_IN_APP` is
 *   `"in_app"`. The zero value (`*_UNSPECIFIED`) means "not given": it is never written for a
 *   singular field and never accepted by name;
 * - every integer, 64-bit ones included, is a JSON number (never a string); timestamps are
 *   `double` epoch seconds in the contracts, so they are plain numbers too;
 * - records are complete: a field without presence is written even at its zero value
 *   (`"allowed": false`, `"shadow": false`, `"notifications": []`), while a field with presence
 *   (proto3 `optional`, a oneof member, a message) is written only when set.
 *
 * Reading is strict: unknown fields, a wrong JSON type, an out-of-range integer, an unknown enum
 * value, or two members of one oneof throw a {@link PlatformError} `invalid_field` whose `field`
 * is the path of the bad value (`quotas[0].algorithm`, `template_data.name`). A JSON `null` counts
 * as absent. Required-ness is not checked here; the service that receives the message does that.
 *
 * The contracts use no google.protobuf well-known types, and this converter does not handle them.
 */
import { fromJson as protoFromJson, ScalarType } from '@bufbuild/protobuf';
import type { DescEnum, DescField, DescMessage, JsonObject, JsonValue, MessageShape } from '@bufbuild/protobuf';
import { reflect } from '@bufbuild/protobuf/reflect';
import type { ReflectList, ReflectMap, ReflectMessage } from '@bufbuild/protobuf/reflect';
import { base64Encode } from '@bufbuild/protobuf/wire';
import { invalidField, PlatformError } from './errors.js';

/** A JSON object as produced by {@link toJson}. */
export type JsonRecord = Record<string, unknown>;

export interface ToJsonOptions {
  /**
   * Write fields without presence at their zero value (`0`, `false`, `""`, `[]`, `{}`).
   * Default true: records users see are complete. false gives proto3's compact form, where such
   * fields are omitted (e.g. a partial request body a CLI sends).
   */
  emitDefaults?: boolean;
}

export interface FromJsonOptions {
  /**
   * Skip fields the schema does not know instead of rejecting them. Default false. Use it for
   * documents that legitimately carry more than the contract, such as a JWT payload with
   * registered claims the contract does not model.
   */
  ignoreUnknownFields?: boolean;
}

// google.protobuf.FeatureSet.FieldPresence.IMPLICIT
const IMPLICIT = 2;

/** Serializes a message to its JSON object (see the module comment for the rules). */
export function toJson<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>, options: ToJsonOptions = {}): JsonRecord {
  return messageToJson(reflect(schema, message), options.emitDefaults ?? true);
}

/** {@link toJson}, then `JSON.stringify`. */
export function toJsonString<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>, options: ToJsonOptions = {}): string {
  return JSON.stringify(toJson(schema, message, options));
}

/**
 * Parses a JSON value (already decoded with `JSON.parse`) into a message.
 *
 * @throws PlatformError `invalid_field` naming the bad field; `bad_request` when `json` is not an
 *   object.
 */
export function fromJson<Desc extends DescMessage>(schema: Desc, json: unknown, options: FromJsonOptions = {}): MessageShape<Desc> {
  if (!isObject(json)) throw new PlatformError('bad_request', { detail: `expected a JSON object for ${schema.name}` });
  const canonical = messageFromJson(schema, json, '', options.ignoreUnknownFields ?? false);
  try {
    return protoFromJson(schema, canonical);
  } catch (err) {
    // Unreachable when the walk above is right: everything protobuf-es checks was checked there.
    throw new PlatformError('invalid_field', { detail: `invalid ${schema.name}`, cause: err });
  }
}

/**
 * The checks of {@link fromJson} without building the message: throws as it does, else returns.
 * For stored documents that are checked far more often than they are used as messages (identity's
 * event payloads, checked before every projection).
 */
export function checkJson(schema: DescMessage, json: unknown, options: FromJsonOptions = {}): void {
  if (!isObject(json)) throw new PlatformError('bad_request', { detail: `expected a JSON object for ${schema.name}` });
  messageFromJson(schema, json, '', options.ignoreUnknownFields ?? false);
}

/**
 * Parses JSON text into a message.
 *
 * @throws PlatformError `invalid_json` when the text is not JSON; otherwise as {@link fromJson}.
 */
export function fromJsonString<Desc extends DescMessage>(schema: Desc, text: string, options: FromJsonOptions = {}): MessageShape<Desc> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new PlatformError('invalid_json', { cause: err });
  }
  return fromJson(schema, json, options);
}

/** The JSON name of an enum value: its .proto name without the enum's prefix, lowercase. */
export function enumToJson(desc: DescEnum, value: number): string | undefined {
  const v = desc.value[value];
  return v === undefined ? undefined : jsonEnumName(desc, v.name);
}

/**
 * The enum value for a JSON name (`"token_bucket"` → `Algorithm.TOKEN_BUCKET`); undefined for an
 * unknown name and for the zero value's name. For query parameters and config values.
 */
export function enumFromJson(desc: DescEnum, name: string): number | undefined {
  return enumNames(desc).get(name);
}

/** The JSON names an enum accepts, in declaration order (zero value excluded). */
export function enumJsonNames(desc: DescEnum): string[] {
  return [...enumNames(desc).keys()];
}

// ── writing ────────────────────────────────────────────────────────────────

function messageToJson(msg: ReflectMessage, emitDefaults: boolean): JsonRecord {
  assertPlainMessage(msg.desc);
  const out: JsonRecord = {};
  for (const f of msg.fields) {
    if (!msg.isSet(f)) {
      if (!emitDefaults || f.presence !== IMPLICIT) continue;
      // A zero enum means "not given"; "unspecified" is not a value users should see.
      if (f.fieldKind === 'enum') continue;
    } else if (f.fieldKind === 'enum' && msg.get(f) === 0) {
      continue;
    }
    out[f.name] = fieldToJson(f, msg, emitDefaults);
  }
  return out;
}

function fieldToJson(f: DescField, msg: ReflectMessage, emitDefaults: boolean): unknown {
  switch (f.fieldKind) {
    case 'scalar':
      return scalarToJson(f.scalar, msg.get(f), f.name);
    case 'enum':
      return enumValueToJson(f.enum, msg.get(f));
    case 'message':
      return messageToJson(msg.get(f), emitDefaults);
    case 'list': {
      const list: ReflectList = msg.get(f);
      const out: unknown[] = [];
      for (const item of list) {
        if (f.listKind === 'scalar') out.push(scalarToJson(f.scalar, item, f.name));
        else if (f.listKind === 'enum') out.push(enumValueToJson(f.enum, item as number));
        else out.push(messageToJson(item as ReflectMessage, emitDefaults));
      }
      return out;
    }
    case 'map': {
      const map: ReflectMap = msg.get(f);
      const out: JsonRecord = {};
      for (const [key, value] of map) {
        const k = String(key);
        if (f.mapKind === 'scalar') out[k] = scalarToJson(f.scalar, value, f.name);
        else if (f.mapKind === 'enum') out[k] = enumValueToJson(f.enum, value as number);
        else out[k] = messageToJson(value as ReflectMessage, emitDefaults);
      }
      return out;
    }
  }
}

function enumValueToJson(desc: DescEnum, value: number): string | number {
  // A value this build does not know (sent by a newer peer) has no name; keep its number.
  return enumToJson(desc, value) ?? value;
}

function scalarToJson(type: ScalarType, value: unknown, field: string): unknown {
  switch (type) {
    case ScalarType.STRING:
    case ScalarType.BOOL:
      return value;
    case ScalarType.BYTES:
      return base64Encode(value as Uint8Array);
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64: {
      const n = Number(value);
      // Contracts mark JSON-visible 64-bit fields jstype = JS_NUMBER; a value beyond 2^53 is a bug.
      if (!Number.isSafeInteger(n)) throw new Error(`proto-json: ${field} = ${String(value)} is not a safe integer`);
      return n;
    }
    default: {
      const n = value as number;
      // JSON has no NaN or Infinity; writing null or a string would hide a bug upstream.
      if (!Number.isFinite(n)) throw new Error(`proto-json: ${field} = ${n} is not a finite number`);
      return n;
    }
  }
}

// ── reading ────────────────────────────────────────────────────────────────

function messageFromJson(desc: DescMessage, json: Record<string, unknown>, path: string, ignoreUnknown: boolean): JsonObject {
  assertPlainMessage(desc);
  const out: JsonObject = {};
  const oneofSeen = new Map<string, string>();
  for (const [key, value] of Object.entries(json)) {
    const fieldPath = path === '' ? key : `${path}.${key}`;
    const f = fieldByProtoName(desc, key);
    if (f === undefined) {
      if (ignoreUnknown) continue;
      throw invalidField(fieldPath, 'unknown field');
    }
    if (value === null) continue;
    if (f.oneof !== undefined) {
      const other = oneofSeen.get(f.oneof.name);
      if (other !== undefined) {
        throw invalidField(fieldPath, `only one of ${f.oneof.fields.map((m) => m.name).join(', ')} may be given (${other} is too)`);
      }
      oneofSeen.set(f.oneof.name, key);
    }
    out[key] = fieldFromJson(f, value, fieldPath, ignoreUnknown);
  }
  return out;
}

function fieldFromJson(f: DescField, value: unknown, path: string, ignoreUnknown: boolean): JsonValue {
  switch (f.fieldKind) {
    case 'scalar':
      return scalarFromJson(f.scalar, value, path);
    case 'enum':
      return enumValueFromJson(f.enum, value, path);
    case 'message':
      if (!isObject(value)) throw invalidField(path, 'must be an object');
      return messageFromJson(f.message, value, path, ignoreUnknown);
    case 'list': {
      if (!Array.isArray(value)) throw invalidField(path, 'must be an array');
      return value.map((item: unknown, i) => {
        const itemPath = `${path}[${i}]`;
        if (f.listKind === 'scalar') return scalarFromJson(f.scalar, item, itemPath);
        if (f.listKind === 'enum') return enumValueFromJson(f.enum, item, itemPath);
        if (!isObject(item)) throw invalidField(itemPath, 'must be an object');
        return messageFromJson(f.message, item, itemPath, ignoreUnknown);
      });
    }
    case 'map': {
      // JSON object keys are strings; the contracts use string-keyed maps only.
      if (f.mapKey !== ScalarType.STRING) throw new Error(`proto-json: ${f.toString()} has non-string map keys`);
      if (!isObject(value)) throw invalidField(path, 'must be an object');
      const out: JsonObject = {};
      for (const [key, item] of Object.entries(value)) {
        const itemPath = `${path}.${key}`;
        if (f.mapKind === 'scalar') out[key] = scalarFromJson(f.scalar, item, itemPath);
        else if (f.mapKind === 'enum') out[key] = enumValueFromJson(f.enum, item, itemPath);
        else if (!isObject(item)) throw invalidField(itemPath, 'must be an object');
        else out[key] = messageFromJson(f.message, item, itemPath, ignoreUnknown);
      }
      return out;
    }
  }
}

function enumValueFromJson(desc: DescEnum, value: unknown, path: string): number {
  const n = typeof value === 'string' ? enumNames(desc).get(value) : undefined;
  if (n === undefined) throw invalidField(path, `must be one of ${enumJsonNames(desc).join(', ')}`);
  return n;
}

const INT32: readonly [number, number] = [-(2 ** 31), 2 ** 31 - 1];
const UINT32: readonly [number, number] = [0, 2 ** 32 - 1];
const INT64: readonly [number, number] = [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];
const UINT64: readonly [number, number] = [0, Number.MAX_SAFE_INTEGER];

function scalarFromJson(type: ScalarType, value: unknown, path: string): JsonValue {
  switch (type) {
    case ScalarType.STRING:
      if (typeof value !== 'string') throw invalidField(path, 'must be a string');
      return value;
    case ScalarType.BOOL:
      if (typeof value !== 'boolean') throw invalidField(path, 'must be a boolean');
      return value;
    case ScalarType.BYTES:
      if (typeof value !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(value)) throw invalidField(path, 'must be a base64 string');
      return value;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      if (typeof value !== 'number' || !Number.isFinite(value)) throw invalidField(path, 'must be a number');
      return value;
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return integerFromJson(value, INT32, path);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return integerFromJson(value, UINT32, path);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return integerFromJson(value, UINT64, path);
    default:
      return integerFromJson(value, INT64, path);
  }
}

function integerFromJson(value: unknown, [min, max]: readonly [number, number], path: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalidField(path, `must be an integer from ${min} to ${max}`);
  }
  return value;
}

// ── shared ─────────────────────────────────────────────────────────────────

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function assertPlainMessage(desc: DescMessage): void {
  if (desc.typeName.startsWith('google.protobuf.')) {
    throw new Error(`proto-json: ${desc.typeName} has a special JSON form this converter does not implement`);
  }
}

function fieldByProtoName(desc: DescMessage, name: string): DescField | undefined {
  let byName = fieldsByName.get(desc);
  if (byName === undefined) {
    byName = new Map(desc.fields.map((f) => [f.name, f]));
    fieldsByName.set(desc, byName);
  }
  return byName.get(name);
}

function jsonEnumName(desc: DescEnum, protoName: string): string {
  // protobuf-es gives the prefix in lowercase ("algorithm_"); every value of our enums carries it.
  const name = protoName.toLowerCase();
  const prefix = desc.sharedPrefix;
  return prefix !== undefined && name.startsWith(prefix) ? name.slice(prefix.length) : name;
}

function enumNames(desc: DescEnum): Map<string, number> {
  let names = enumNamesCache.get(desc);
  if (names === undefined) {
    names = new Map(desc.values.filter((v) => v.number !== 0).map((v) => [jsonEnumName(desc, v.name), v.number]));
    enumNamesCache.set(desc, names);
  }
  return names;
}

const fieldsByName = new WeakMap<DescMessage, Map<string, DescField>>();
const enumNamesCache = new WeakMap<DescEnum, Map<string, number>>();
