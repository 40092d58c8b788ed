/**
 * The console's composition root (`startConsole`), top to bottom:
 *
 * 1. **config**: checked once (config.ts);
 * 2. **core**: the session store, identity as an OAuth client (auth/oidc.ts), the assets;
 * 3. **serving**: one uWS server (shared/http.ts) with the assets, the sign-in routes, the
 *    overview (the home page) and every page of pages/index.ts (router.ts), /healthz, /readyz and
 *    /metrics, and a 404 page for everything else; then the overview's scraper starts
 *    (overview/scraper.ts).
 */
import type { Clock } from '../shared/clock.js';
import { systemClock } from '../shared/clock.js';
import { InFlight, operationalRoutes, route, type EdgeOptions, type Reply } from '../shared/http.js';
import type { Logger } from '../shared/log.js';
import { createRegistry } from '../shared/metrics.js';
import type { Started } from '../shared/main.js';
import { App, closeApp, closeListenSocket, listen } from '../shared/uws.js';
import { ASSET_CACHE_CONTROL, loadAssets } from './assets.js';
import { cookieNames } from './auth/cookies.js';
import { createOidc, type Oidc } from './auth/oidc.js';
import { registerAuthRoutes } from './auth/routes.js';
import { SessionStore } from './auth/sessions.js';
import { checkConsoleConfig, type ConsoleConfig } from './config.js';
import { html } from './html.js';
import type { ConsolePage } from './page.js';
import { pages as allPages } from './pages/index.js';
import { registerPages } from './router.js';
import { overviewPage } from './pages/overview.js';
import { Scraper } from './overview/scraper.js';
import { Web } from './web.js';
import { CONSOLE_SCOPE } from './scope.js';

export interface ConsoleDeps {
  clock?: Clock;
  /** The pages to serve (default: the overview, then pages/index.ts). */
  pages?: readonly ConsolePage[];
  /** Replaces the OAuth client (never in production; tests of the router use the real one). */
  oidc?: Oidc;
}

export interface RunningConsole extends Started {
  readonly port: number;
  readonly sessions: SessionStore;
  /** The overview's scraper (overview/scraper.ts); undefined when `deps.pages` replaced the pages. */
  readonly scraper: Scraper | undefined;
}

export async function startConsole(rawConfig: ConsoleConfig, log: Logger, deps: ConsoleDeps = {}): Promise<RunningConsole> {
  // 1. config
  const config = checkConsoleConfig(rawConfig);
  const clock = deps.clock ?? systemClock;
  // The overview's scraper runs only for the default pages (a test serving its own pages needs none).
  const scraper = deps.pages
    ? undefined
    : new Scraper({
        clock,
        log,
        intervalMs: config.CONSOLE_SCRAPE_INTERVAL,
        timeoutMs: config.CONSOLE_API_TIMEOUT,
        controlPlaneUrl: config.CONSOLE_CONTROL_PLANE_URL,
        notifierUrl: config.NOTIFIER_URL,
        identityUrl: config.IDENTITY_URL,
        sidecarMetricsUrl: config.CONSOLE_SIDECAR_METRICS_URL,
      });
  const pages = deps.pages ?? [overviewPage(scraper), ...allPages];
  const origin = new URL(config.CONSOLE_PUBLIC_URL).origin;
  const secure = origin.startsWith('https:');
  const identityPublicUrl = config.CONSOLE_IDENTITY_PUBLIC_URL ?? config.IDENTITY_URL;

  // 2. core
  const sessions = new SessionStore({ clock, idleMs: config.CONSOLE_SESSION_IDLE, maxMs: config.CONSOLE_SESSION_MAX });
  const oidc =
    deps.oidc ??
    createOidc({
      clientId: config.CONSOLE_CLIENT_ID,
      clientSecret: config.CONSOLE_CLIENT_SECRET,
      identityUrl: config.IDENTITY_URL,
      identityPublicUrl,
      issuer: config.JWT_ISSUER,
      redirectUri: `${origin}/auth/callback`,
      scope: CONSOLE_SCOPE,
      timeoutMs: config.CONSOLE_API_TIMEOUT,
      clock,
    });
  const assets = loadAssets();
  const web = new Web({
    log,
    clock,
    assets,
    sessions,
    cookies: cookieNames(secure),
    secure,
    origin,
    identityOrigin: new URL(identityPublicUrl).origin,
    nav: pages.map((p) => ({ id: p.id, title: p.title, path: p.path })),
  });
  const sweep = setInterval(() => sessions.sweep(), 60_000);
  sweep.unref();

  // 3. serving
  const app = App();
  const inFlight = new InFlight();
  const edge: EdgeOptions = { log, maxBodyBytes: config.MAX_BODY_BYTES, inFlight };
  const registry = createRegistry('console');
  let closing = false;
  operationalRoutes(app, { ...edge, registry, checks: [], draining: () => closing });
  route(
    app,
    'get',
    '/assets/:file',
    (ctx): Reply => {
      const a = assets.byPath(ctx.path);
      if (!a) return web.error(404, 'Not found', 'There is no such file.');
      if (ctx.headers['if-none-match'] === a.etag) return { status: 304, headers: { etag: a.etag, 'cache-control': ASSET_CACHE_CONTROL } };
      return {
        body: a.body,
        contentType: a.contentType,
        headers: { etag: a.etag, 'cache-control': ASSET_CACHE_CONTROL, 'x-content-type-options': 'nosniff' },
      };
    },
    edge,
  );
  registerAuthRoutes(app, edge, { web, oidc, issuer: config.JWT_ISSUER });
  registerPages(app, edge, pages, {
    web,
    oidc,
    apiTimeoutMs: config.CONSOLE_API_TIMEOUT,
    services: { controlPlane: config.CONSOLE_CONTROL_PLANE_URL, notifier: config.NOTIFIER_URL, identity: config.IDENTITY_URL },
  });
  // A console serving its own pages without an overview keeps a home page: the list of them.
  if (!pages.some((p) => p.path === '/'))
    route(
      app,
      'get',
      '/',
      (ctx): Reply => {
        const s = web.session(ctx);
        if (!s) return web.redirect(web.signInLocation('/'));
        return web.page({
          title: 'Operator console',
          session: s,
          body: html`<p>What the console can do, one page each:</p>
            <ul class="home">
              ${pages.map((p) => html`<li><a href="${p.path}">${p.title}</a></li>`)}
            </ul>`,
        });
      },
      edge,
    );
  route(app, 'any', '/*', (ctx): Reply => web.error(404, 'Not found', 'There is no page here.', web.session(ctx)), edge);

  const { socket, port } = await listen(app, config.HOST, config.CONSOLE_PORT);
  log.info({ port, host: config.HOST, pages: pages.map((p) => p.id) }, 'console listening');
  scraper?.start();
  return {
    port,
    sessions,
    scraper,
    urls: { console: `http://${config.HOST}:${port}` },
    async close() {
      if (closing) return;
      closing = true;
      clearInterval(sweep);
      await scraper?.stop();
      closeListenSocket(socket);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([inFlight.idle(), new Promise<void>((r) => (timer = setTimeout(r, config.SHUTDOWN_GRACE)))]);
      clearTimeout(timer);
      // Then the connections left, the browsers' idle keep-alive ones: as shared/service.ts says.
      closeApp(app);
    },
  };
}
