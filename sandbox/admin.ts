/**
 * The sandbox's own API, for tests, benchmarks and people:
 * - `GET /sandbox/messages?channel=&provider=&to=&delivery_id=` → `{messages, total}`
 *   (accepted messages, oldest first; `limit` keeps the newest N);
 * - `DELETE /sandbox/messages` → 204: forgets messages, counts, idempotency keys and what was shown;
 * - `GET /sandbox/deliveries/{delivery_id}` → `{delivery_id, requests, accepted, counts: [...]}`;
 * - `GET /sandbox/duplicates` → `{duplicates: [...]}`: every (channel, provider, delivery id,
 *   address) accepted more than once, i.e. a provider that saw a delivery twice;
 * - what recipients would see (display.ts, display-routes.ts): `GET /sandbox/display`,
 *   `GET /sandbox/display/{channel}/{address}`, `PUT /sandbox/devices/{token}`;
 * - `GET /sandbox/faults`, `POST /sandbox/faults` (one profile or an array; each replaces the
 *   profile of its channel and provider), `DELETE /sandbox/faults?channel=&provider=` → 204.
 */
import { PlatformError, invalidField } from '../shared/errors.js';
import type { EdgeOptions } from '../shared/http.js';
import { route } from '../shared/http.js';
import type { TemplatedApp } from '../shared/uws.js';
import type { SandboxCore } from './core.js';
import { SANDBOX_CHANNELS, faultProfileJson, parseFaultProfile, type SandboxChannel } from './faults.js';
import type { MessageFilter } from './store.js';
import { displayRoutes } from './display-routes.js';

const FILTERS = ['channel', 'provider', 'to', 'delivery_id'] as const;

export function adminRoutes(app: TemplatedApp, edge: EdgeOptions, core: SandboxCore): void {
  route(
    app,
    'get',
    '/sandbox/messages',
    (ctx) => {
      const filter: MessageFilter = {};
      for (const k of FILTERS) {
        const v = ctx.query.get(k);
        if (v !== null) filter[k] = v;
      }
      let messages = core.store.list(filter);
      const total = messages.length;
      const limit = ctx.query.get('limit');
      if (limit !== null) {
        const n = Number(limit);
        if (!Number.isInteger(n) || n < 1) throw invalidField('limit', 'must be a positive integer');
        messages = messages.slice(-n);
      }
      return { body: { messages, total } };
    },
    edge,
  );
  route(
    app,
    'del',
    '/sandbox/messages',
    () => {
      core.store.clear();
      core.display.clear();
      return { status: 204 };
    },
    edge,
  );
  route(
    app,
    'get',
    '/sandbox/deliveries/:delivery_id',
    (ctx) => {
      const counts = core.store.delivery(ctx.params[0]!);
      const requests = counts.reduce((n, c) => n + c.requests, 0);
      const accepted = counts.reduce((n, c) => n + c.accepted, 0);
      return { body: { delivery_id: ctx.params[0], requests, accepted, counts } };
    },
    edge,
  );
  route(app, 'get', '/sandbox/duplicates', () => ({ body: { duplicates: core.store.duplicates() } }), edge);
  displayRoutes(app, edge, core);
  route(app, 'get', '/sandbox/faults', () => ({ body: { faults: core.faults.list().map(faultProfileJson) } }), edge);
  route(
    app,
    'post',
    '/sandbox/faults',
    (ctx) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(ctx.body.toString('utf8'));
      } catch {
        throw new PlatformError('invalid_json', { detail: 'the body is not valid JSON' });
      }
      const profiles = (Array.isArray(parsed) ? parsed : [parsed]).map(parseFaultProfile);
      for (const p of profiles) core.faults.set(p);
      // Token and address lists stay out of the log; their sizes say enough.
      const shown = profiles.map(({ unregisteredTokens, invalidRecipients, ...p }) => ({
        ...p,
        unregisteredTokens: unregisteredTokens.size,
        invalidRecipients: invalidRecipients.size,
      }));
      core.log.info({ faults: shown }, 'sandbox fault profiles set');
      return { body: { faults: core.faults.list().map(faultProfileJson) } };
    },
    edge,
  );
  route(
    app,
    'del',
    '/sandbox/faults',
    (ctx) => {
      const channel = ctx.query.get('channel') ?? undefined;
      if (channel !== undefined && !(SANDBOX_CHANNELS as readonly string[]).includes(channel)) {
        throw invalidField('channel', `must be one of ${SANDBOX_CHANNELS.join(', ')}`);
      }
      core.faults.clear(channel as SandboxChannel | undefined, ctx.query.get('provider') ?? undefined);
      return { status: 204 };
    },
    edge,
  );
}
