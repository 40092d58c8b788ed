/**
 * The display model on the sandbox's admin API (display.ts), for tests and benchmarks that count
 * duplicates visible to the recipient apart from duplicates at the provider:
 * - `GET /sandbox/display` → `{push, email, sms}`, each `{recipients, arrived, shown, replaced,
 *   visible_duplicates, provider_duplicates}`: `provider_duplicates` is the copies beyond the first
 *   that a provider accepted for one (delivery id, address), `visible_duplicates` those of them the
 *   recipient sees as a second entry;
 * - `GET /sandbox/display/{channel}/{address}` → what one device (push token), mailbox or phone
 *   shows (address URL-encoded);
 * - `PUT /sandbox/devices/{token}` with `{platform: "ios" | "android" | "web"}` → 204: the token's
 *   platform, as the app's registration with the push service would tell FCM.
 */
import { PlatformError, invalidField } from '../shared/errors.js';
import type { EdgeOptions } from '../shared/http.js';
import { route } from '../shared/http.js';
import type { TemplatedApp } from '../shared/uws.js';
import type { SandboxCore } from './core.js';
import { DEVICE_PLATFORMS, type DevicePlatform, type DisplayView } from './display.js';

const CHANNELS: readonly DisplayView['channel'][] = ['push', 'email', 'sms'];

export function displayRoutes(app: TemplatedApp, edge: EdgeOptions, core: SandboxCore): void {
  route(
    app,
    'get',
    '/sandbox/display',
    () => {
      const summary = core.display.summary();
      const atProvider: Record<string, number> = { push: 0, email: 0, sms: 0 };
      for (const d of core.store.duplicates()) atProvider[d.channel] = (atProvider[d.channel] ?? 0) + d.accepted - 1;
      const body = Object.fromEntries(CHANNELS.map((c) => [c, { ...summary[c], provider_duplicates: atProvider[c] ?? 0 }]));
      return { body };
    },
    edge,
  );
  route(
    app,
    'get',
    '/sandbox/display/:channel/:address',
    (ctx) => {
      const channel = ctx.params[0]!;
      if (!(CHANNELS as readonly string[]).includes(channel)) throw invalidField('channel', `must be one of ${CHANNELS.join(', ')}`);
      return { body: core.display.view(channel as DisplayView['channel'], ctx.params[1]!) };
    },
    edge,
  );
  route(
    app,
    'put',
    '/sandbox/devices/:token',
    (ctx) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(ctx.body.toString('utf8'));
      } catch {
        throw new PlatformError('invalid_json', { detail: 'the body is not valid JSON' });
      }
      const platform = (parsed as { platform?: unknown } | null)?.platform;
      if (typeof platform !== 'string' || !(DEVICE_PLATFORMS as readonly string[]).includes(platform)) {
        throw invalidField('platform', `must be one of ${DEVICE_PLATFORMS.join(', ')}`);
      }
      core.display.register(ctx.params[0]!, platform as DevicePlatform);
      return { status: 204 };
    },
    edge,
  );
}
