/**
 * The operator API of the provider ramp (roles NOTIFIER_ADMIN_ROLES; README, "Replacing a
 * provider"):
 *
 * - `GET /api/v1/admin/providers`: every ramp-able channel (push, email, sms), `{channels: [view]}`;
 * - `GET /api/v1/admin/providers/{channel}`: one channel's view: its providers with their role
 *   (`old`, `new`, `secondary`) and the live weight of old and new in percent, `shadow_percent`,
 *   how a shadow copy is sent (`validate_only`, `test_recipients`, or null when it cannot be),
 *   `updated_by`, `updated_at` (epoch seconds);
 * - `PUT /api/v1/admin/providers/{channel}` with `{"weights": {"<old>": 95, "<new>": 5}}` and/or
 *   `{"shadow_percent": 10}` (percentages with at most two decimals; the weights name the old and
 *   the new provider and add up to 100): stored, audited (who, when, what it was) and applied by
 *   every replica at once (NOTIFY; each also rereads every NOTIFIER_RAMP_POLL) → 200 with the view;
 * - `GET /api/v1/admin/providers/{channel}/changes?limit=`: the audit, newest first.
 *
 * A channel without a new provider configured answers a change with 409
 * `provider_ramp_not_configured`; a shadow share on e-mail or SMS without test recipients, 409
 * `ramp_test_recipients_missing`.
 */
import type { Pool } from '../../shared/db.js';
import { invalidField, PlatformError } from '../../shared/errors.js';
import { jsonBody, route, type EdgeOptions } from '../../shared/http.js';
import type { TemplatedApp } from '../../shared/uws.js';
import { requireRole, type CallerResolver } from '../caller.js';
import { BUCKETS, bucketsToPercent, percentToBuckets } from './choice.js';
import { isRampChannel, type ProviderRamp } from './providers.js';
import { listRampChanges, saveRamp, RAMP_CHANNELS, type RampChannel } from './store.js';

export interface RampRoutesOptions {
  pool: Pool;
  caller: CallerResolver;
  adminRoles: readonly string[];
  ramp: ProviderRamp;
}

interface ProviderView {
  name: string;
  role: 'old' | 'new' | 'secondary';
  /** Share of live deliveries, percent; absent for a secondary (it takes only failovers). */
  weight_percent?: number;
}

export interface RampView {
  channel: RampChannel;
  providers: ProviderView[];
  shadow_percent: number;
  shadow: 'validate_only' | 'test_recipients' | null;
  updated_by: string | null;
  updated_at: number | null;
}

/** A channel's providers and ramp settings as the API shows them. */
export function rampView(ramp: ProviderRamp, channel: RampChannel): RampView {
  const s = ramp.settings(channel);
  const secondaryName = ramp.secondary(channel)?.provider;
  const old = ramp.old(channel);
  const next = ramp.new(channel);
  const providers: ProviderView[] = [];
  if (old) providers.push({ name: old.provider, role: 'old', weight_percent: bucketsToPercent(next ? BUCKETS - s.weight : BUCKETS) });
  if (next) providers.push({ name: next.provider, role: 'new', weight_percent: bucketsToPercent(s.weight) });
  if (secondaryName !== undefined) providers.push({ name: secondaryName, role: 'secondary' });
  return {
    channel,
    providers,
    shadow_percent: next ? bucketsToPercent(s.shadow) : 0,
    shadow: !next || !ramp.canShadow(channel) ? null : channel === 'push' ? 'validate_only' : 'test_recipients',
    updated_by: s.updatedBy,
    updated_at: s.updatedAt === null ? null : Math.floor(s.updatedAt / 1000),
  };
}

/** A percentage from 0 to 100 with at most two decimals, in buckets. */
function percent(raw: unknown, field: string): number {
  if (typeof raw !== 'number' || !Number.isFinite(raw) || raw < 0 || raw > 100) throw invalidField(field, 'must be a number from 0 to 100');
  const b = percentToBuckets(raw);
  if (Math.abs(raw * 100 - b) > 1e-6) throw invalidField(field, 'must have at most two decimals');
  return b;
}

export function registerRampRoutes(app: TemplatedApp, edge: EdgeOptions, o: RampRoutesOptions): void {
  const admin = async (ctx: { headers: Readonly<Record<string, string>> }): Promise<string> => {
    const caller = await o.caller.callerOf(ctx);
    requireRole(caller, o.adminRoles);
    return caller.subject;
  };
  const channelOf = (raw: string): RampChannel => {
    if (!isRampChannel(raw)) throw new PlatformError('not_found', { detail: 'providers are ramped on push, email or sms' });
    return raw;
  };
  const view = (c: RampChannel): RampView => rampView(o.ramp, c);

  route(
    app,
    'get',
    '/api/v1/admin/providers',
    async (ctx) => {
      await admin(ctx);
      return { body: { channels: RAMP_CHANNELS.map(view) } };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/providers/:channel',
    async (ctx) => {
      await admin(ctx);
      return { body: view(channelOf(ctx.params[0]!)) };
    },
    edge,
  );

  route(
    app,
    'get',
    '/api/v1/admin/providers/:channel/changes',
    async (ctx) => {
      await admin(ctx);
      const channel = channelOf(ctx.params[0]!);
      const raw = ctx.query.get('limit');
      const limit = raw === null ? 50 : /^\d+$/.test(raw) ? Number(raw) : NaN;
      if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw invalidField('limit', 'must be an integer from 1 to 500');
      const changes = await listRampChanges(o.pool, channel, limit);
      return {
        body: {
          changes: changes.map((c) => ({
            id: c.id,
            weight_percent: bucketsToPercent(c.weight),
            shadow_percent: bucketsToPercent(c.shadow),
            previous_weight_percent: bucketsToPercent(c.previousWeight),
            previous_shadow_percent: bucketsToPercent(c.previousShadow),
            changed_by: c.changedBy,
            changed_at: Math.floor(c.changedAt / 1000),
          })),
        },
      };
    },
    edge,
  );

  route(
    app,
    'put',
    '/api/v1/admin/providers/:channel',
    async (ctx) => {
      const by = await admin(ctx);
      const channel = channelOf(ctx.params[0]!);
      const body = jsonBody(ctx);
      for (const k of Object.keys(body)) if (!['weights', 'shadow_percent'].includes(k)) throw invalidField(k, 'is not a field of a ramp');
      if (body['weights'] === undefined && body['shadow_percent'] === undefined) {
        throw invalidField('weights', 'give weights, shadow_percent or both');
      }
      const old = o.ramp.old(channel);
      const next = o.ramp.new(channel);
      if (!old || !next) {
        throw new PlatformError('provider_ramp_not_configured', {
          detail: `no new ${channel} provider is configured (${{ push: 'FCM', email: 'SMTP', sms: 'SMS' }[channel]}_RAMP_URL)`,
        });
      }
      const current = o.ramp.settings(channel);
      let weight = current.weight;
      if (body['weights'] !== undefined) {
        const w = body['weights'];
        if (w === null || typeof w !== 'object' || Array.isArray(w))
          throw invalidField('weights', 'must be an object of provider name → percent');
        const names = Object.keys(w);
        const expected = [old.provider, next.provider];
        if (names.length !== 2 || !expected.every((n) => names.includes(n))) {
          throw invalidField('weights', `must name exactly ${expected.join(' and ')}`);
        }
        const rec = w as Record<string, unknown>;
        const oldW = percent(rec[old.provider], `weights.${old.provider}`);
        weight = percent(rec[next.provider], `weights.${next.provider}`);
        if (oldW + weight !== BUCKETS) throw invalidField('weights', 'must add up to 100');
      }
      let shadow = current.shadow;
      if (body['shadow_percent'] !== undefined) {
        shadow = percent(body['shadow_percent'], 'shadow_percent');
        if (shadow > 0 && !o.ramp.canShadow(channel)) {
          throw new PlatformError('ramp_test_recipients_missing', {
            detail: `a ${channel} shadow copy goes to a test recipient, and ${channel === 'email' ? 'NOTIFIER_RAMP_TEST_EMAILS' : 'NOTIFIER_RAMP_TEST_PHONES'} is unset`,
          });
        }
      }
      await saveRamp(o.pool, channel, { weight, shadow }, by);
      // This replica applies it before answering; the others on the NOTIFY.
      await o.ramp.reload();
      return { body: view(channel) };
    },
    edge,
  );
}
