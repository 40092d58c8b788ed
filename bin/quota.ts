/**
 * The quota admin CLI: gRPC calls to the control plane's QuotaAdminService.
 *
 *   npm run quota -- put    (--key <api key> | --subject <id>) --rate <n> [--burst <n>]
 *                           [--algorithm token_bucket] [--unit second | --interval 1s] [--cost <n>]
 *                           [--plan <name>] [--fail-mode open|closed] [--shadow] [--accuracy exact|approximate]
 *                           [--route /prefix[=cost]]... [--ack-timeout 2s] [--json]
 *   npm run quota -- get    (--key <api key> | --subject <id>) [--json]
 *   npm run quota -- delete (--key <api key> | --subject <id>) [--ack-timeout 2s]
 *   npm run quota -- list   [--page-size <n>] [--json]
 *
 * `--key` takes a raw API key and sends only its hash (`key:<sha256 hex>`); the key itself never
 * leaves this process. `--rate 0 --plan pro` makes a plan reference. `--algorithm` defaults to
 * token_bucket and `--burst` to the rate. Reads CONTROL_PLANE_GRPC_URL (default 127.0.0.1:50051)
 * and ADMIN_TOKEN from the environment; an unset ADMIN_TOKEN is read from `npm start`'s
 * `<DATA_DIR>/secrets.env`.
 *
 * Exit status: 0 done (a put whose sidecars lag still succeeded: they are listed, and a warning
 * goes to stderr); 1 the call failed (one line on stderr, e.g. `quota: NOT_FOUND: no quota for
 * this subject`); 2 bad usage or configuration.
 */
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import type { GenEnum } from '@bufbuild/protobuf/codegenv2';
import {
  AlgorithmSchema,
  DeleteRequestSchema,
  FailModeSchema,
  AccuracySchema,
  GetRequestSchema,
  ListRequestSchema,
  PutRequestSchema,
  PutResponseSchema,
  QuotaAdminService,
  QuotaSchema,
  RouteRuleSchema,
  UnitSchema,
  type PutRequest,
  type Quota,
} from '../proto/gen/quota/v1/quota_pb.js';
import { duration } from '../shared/config.js';
import { loadCliConfig, parseCommandLine, runCli, UsageError } from './cli.js';
import { quotaCliConfig } from './config.js';
import { GRPC_ERROR_FIELD_KEY, grpcClientConstructor, unaryCall, type GrpcClient } from '../shared/grpc.js';
import { enumFromJson, enumJsonNames, enumToJson, toJson } from '../shared/proto-json.js';
import { apiKeySubject } from '../limiter/control-plane/subject.js';

const USAGE = `usage: npm run quota -- <put|get|delete|list> [flags]
  put     (--key K | --subject S) --rate N [--burst N] [--algorithm A] [--unit U | --interval D]
          [--cost N] [--plan P] [--fail-mode open|closed] [--shadow] [--accuracy exact|approximate]
          [--route /prefix[=cost]]...
          [--ack-timeout D] [--json]
  get     (--key K | --subject S) [--json]
  delete  (--key K | --subject S) [--ack-timeout D]
  list    [--page-size N] [--json]
environment: CONTROL_PLANE_GRPC_URL (default 127.0.0.1:50051), ADMIN_TOKEN (unset: from .data/secrets.env)`;

const OPTIONS = {
  key: { type: 'string' },
  subject: { type: 'string' },
  algorithm: { type: 'string' },
  rate: { type: 'string' },
  burst: { type: 'string' },
  unit: { type: 'string' },
  interval: { type: 'string' },
  cost: { type: 'string' },
  plan: { type: 'string' },
  'fail-mode': { type: 'string' },
  shadow: { type: 'boolean' },
  accuracy: { type: 'string' },
  route: { type: 'string', multiple: true },
  'ack-timeout': { type: 'string' },
  'page-size': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Flags = ReturnType<typeof parseCommandLine<typeof OPTIONS>>['values'];

/** Where the CLI was told to reach the control plane, for the UNAVAILABLE message. */
let controlPlaneUrl = '127.0.0.1:50051';
type Client = GrpcClient<typeof QuotaAdminService>;

async function main(argv: string[]): Promise<number> {
  const { values: flags, positionals } = parseCommandLine(argv, OPTIONS);
  if (flags.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [command, ...extra] = positionals;
  if (command === undefined) throw new UsageError('a command is required: put, get, delete or list');
  if (extra.length > 0) throw new UsageError(`unexpected argument: ${extra[0]}`);

  const config = loadCliConfig(quotaCliConfig);
  controlPlaneUrl = config.CONTROL_PLANE_GRPC_URL;
  const metadata = new grpc.Metadata();
  if (config.ADMIN_TOKEN) metadata.set('authorization', `Bearer ${config.ADMIN_TOKEN}`);
  const Client = grpcClientConstructor(QuotaAdminService);
  const client = new Client(config.CONTROL_PLANE_GRPC_URL, grpc.credentials.createInsecure());
  try {
    switch (command) {
      case 'put':
        return await put(client, metadata, flags);
      case 'get':
        return await get(client, metadata, flags);
      case 'delete':
        return await del(client, metadata, flags);
      case 'list':
        return await list(client, metadata, flags);
      default:
        throw new UsageError(`unknown command ${command}: use put, get, delete or list`);
    }
  } finally {
    client.close();
  }
}

function subjectOf(flags: Flags): string {
  if (flags.key !== undefined && flags.subject !== undefined) throw new UsageError('give --key or --subject, not both');
  if (flags.key !== undefined) {
    if (flags.key === '') throw new UsageError('--key must not be empty');
    return apiKeySubject(flags.key);
  }
  if (flags.subject !== undefined && flags.subject !== '') return flags.subject;
  throw new UsageError('--key <api key> or --subject <id> is required');
}

function integer(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) > 0xffff_ffff) throw new UsageError(`--${name} must be a whole number, got ${raw}`);
  return Number(raw);
}

function ms(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  try {
    return duration(raw);
  } catch {
    throw new UsageError(`--${name} must be a duration such as 500ms, 1s or 1m, got ${raw}`);
  }
}

function enumFlag<E extends number>(name: string, desc: GenEnum<E>, raw: string | undefined): E {
  if (raw === undefined) return 0 as E;
  const v = enumFromJson(desc, raw);
  if (v === undefined) throw new UsageError(`--${name} must be one of ${enumJsonNames(desc).join(', ')}, got ${raw}`);
  return v as E;
}

/** `--route /v1/search=5`: a path prefix, optionally with the cost of a matching request. */
function routeOf(raw: string) {
  const m = /^(\/[^=\s]*)(?:=(\d+))?$/.exec(raw);
  if (!m) throw new UsageError(`--route must be /prefix or /prefix=cost, got ${raw}`);
  return create(RouteRuleSchema, { pathPrefix: m[1]!, cost: m[2] === undefined ? 0 : Number(m[2]) });
}

async function put(client: Client, metadata: grpc.Metadata, flags: Flags): Promise<number> {
  const subjectId = subjectOf(flags);
  const rate = integer('rate', flags.rate);
  if (rate === undefined) throw new UsageError('--rate is required (0 with --plan makes a plan reference)');
  if (flags.unit !== undefined && flags.interval !== undefined) throw new UsageError('give --unit or --interval, not both');
  const reference = rate === 0;
  const quota = create(QuotaSchema, {
    subjectId,
    rate,
    algorithm: enumFlag('algorithm', AlgorithmSchema, flags.algorithm ?? (reference ? undefined : 'token_bucket')),
    burst: integer('burst', flags.burst) ?? 0,
    unit: enumFlag('unit', UnitSchema, flags.unit),
    intervalMs: ms('interval', flags.interval) ?? 0,
    cost: integer('cost', flags.cost) ?? 0,
    plan: flags.plan ?? '',
    failMode: enumFlag('fail-mode', FailModeSchema, flags['fail-mode']),
    shadow: flags.shadow ?? false,
    accuracy: enumFlag('accuracy', AccuracySchema, flags.accuracy),
    routes: (flags.route ?? []).map(routeOf),
  });
  const ackTimeoutMs = ms('ack-timeout', flags['ack-timeout']) ?? 0;
  const request: PutRequest = create(PutRequestSchema, { quota, ackTimeoutMs });
  const res = await unaryCall<typeof QuotaAdminService, 'put'>(client, 'put', request, { metadata, timeoutMs: 15_000 + ackTimeoutMs });
  if (flags.json) print(JSON.stringify(toJson(PutResponseSchema, res)));
  else {
    printRecord(res.quota);
    printLines([
      ['acked', res.ackedSidecarIds.join(', ') || '-'],
      ['lagging', res.laggingSidecarIds.join(', ') || '-'],
    ]);
  }
  if (res.laggingSidecarIds.length > 0)
    process.stderr.write(`quota: warning: ${res.laggingSidecarIds.length} sidecar(s) had not applied version ${res.version} yet\n`);
  return 0;
}

async function get(client: Client, metadata: grpc.Metadata, flags: Flags): Promise<number> {
  const res = await unaryCall<typeof QuotaAdminService, 'get'>(client, 'get', create(GetRequestSchema, { subjectId: subjectOf(flags) }), {
    metadata,
    timeoutMs: 15_000,
  });
  if (flags.json) print(JSON.stringify(toJson(QuotaSchema, res.quota ?? create(QuotaSchema))));
  else printRecord(res.quota);
  return 0;
}

async function del(client: Client, metadata: grpc.Metadata, flags: Flags): Promise<number> {
  const ackTimeoutMs = ms('ack-timeout', flags['ack-timeout']) ?? 0;
  const subjectId = subjectOf(flags);
  const res = await unaryCall<typeof QuotaAdminService, 'delete'>(
    client,
    'delete',
    create(DeleteRequestSchema, { subjectId, ackTimeoutMs }),
    { metadata, timeoutMs: 15_000 + ackTimeoutMs },
  );
  if (!res.deleted) {
    process.stderr.write(`quota: NOT_FOUND: no quota for ${subjectId}\n`);
    return 1;
  }
  printLines([
    ['deleted', subjectId],
    ['version', String(res.version)],
    ['acked', res.ackedSidecarIds.join(', ') || '-'],
    ['lagging', res.laggingSidecarIds.join(', ') || '-'],
  ]);
  return 0;
}

async function list(client: Client, metadata: grpc.Metadata, flags: Flags): Promise<number> {
  const pageSize = integer('page-size', flags['page-size']) ?? 500;
  const all: Quota[] = [];
  let pageToken = '';
  do {
    const page = await unaryCall<typeof QuotaAdminService, 'list'>(client, 'list', create(ListRequestSchema, { pageSize, pageToken }), {
      metadata,
      timeoutMs: 15_000,
    });
    all.push(...page.quotas);
    pageToken = page.nextPageToken;
  } while (pageToken !== '');
  if (flags.json) {
    print(JSON.stringify(all.map((q) => toJson(QuotaSchema, q))));
    return 0;
  }
  const rows = all.map((q) => [
    q.subjectId,
    nameOf(AlgorithmSchema, q.algorithm) ?? '-',
    String(q.rate),
    String(q.burst),
    q.intervalMs ? `${q.intervalMs}ms` : '-',
    q.plan || '-',
    String(q.version),
  ]);
  print(table(['SUBJECT', 'ALGORITHM', 'RATE', 'BURST', 'INTERVAL', 'PLAN', 'VERSION'], rows));
  print(`${all.length} quota${all.length === 1 ? '' : 's'}`);
  return 0;
}

function printRecord(q: Quota | undefined): void {
  if (!q) return;
  printLines([
    ['subject_id', q.subjectId],
    ['algorithm', nameOf(AlgorithmSchema, q.algorithm) ?? (q.rate === 0 ? `- (from plan ${q.plan})` : '-')],
    ['rate', String(q.rate)],
    ['burst', String(q.burst)],
    ['interval_ms', String(q.intervalMs)],
    ['cost', String(q.cost)],
    ['fail_mode', nameOf(FailModeSchema, q.failMode) ?? '- (route class default)'],
    ['shadow', String(q.shadow)],
    ['accuracy', nameOf(AccuracySchema, q.accuracy) ?? (q.rate === 0 ? `- (from plan ${q.plan})` : 'exact')],
    ['plan', q.plan || '-'],
    ['routes', q.routes.map((r) => `${r.pathPrefix}${r.methods.length ? ` ${r.methods.join('|')}` : ''} cost ${r.cost}`).join('; ') || '-'],
    ['version', String(q.version)],
    ['updated_at', new Date(q.updatedAt * 1000).toISOString()],
  ]);
}

/** The JSON name of an enum value; undefined for the zero value (not set). */
function nameOf(desc: GenEnum<number>, value: number): string | undefined {
  return value === 0 ? undefined : enumToJson(desc, value);
}

function printLines(lines: [string, string][]): void {
  const width = Math.max(...lines.map(([k]) => k.length));
  print(lines.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n'));
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

function print(text: string): void {
  process.stdout.write(`${text}\n`);
}

/** One line for a failed call: the status name, the message and the field at fault. */
function describe(err: unknown): string {
  const e = err as Partial<grpc.ServiceError>;
  if (typeof e.code === 'number') {
    const name = grpc.status[e.code] ?? String(e.code);
    if (e.code === grpc.status.UNAVAILABLE && !e.metadata?.get('error-code').length) {
      return `UNAVAILABLE: cannot reach the control plane at ${controlPlaneUrl} (${e.details ?? 'no details'})`;
    }
    const field = e.metadata?.get(GRPC_ERROR_FIELD_KEY)[0];
    const details = (e.details ?? '').split('\n')[0] ?? '';
    return field !== undefined && !details.includes(String(field)) ? `${name}: ${String(field)}: ${details}` : `${name}: ${details}`;
  }
  return err instanceof Error ? err.message.split('\n')[0]! : String(err);
}

runCli('quota', USAGE, () => main(process.argv.slice(2)), describe);
