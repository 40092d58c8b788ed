/**
 * OAuth clients (identity's client registry): the list, one client's details, registering a new
 * one and replacing a confidential client's secret.
 *
 * A secret exists in the console only while the answer to the registration or the rotation is
 * being rendered: it is written into that one answer page (sent `no-store`), never into a redirect,
 * a flash, the session or a log, so it is shown exactly once. Replacing a secret breaks the client
 * at once, so it asks for a confirmation (a checkbox the form must carry).
 */
import { html, href, type Html } from '../html.js';
import { checkbox, details, field, select, table, textarea } from '../forms.js';
import type { ApiProblem } from '../api/problem.js';
import {
  getClient,
  listClients,
  registerClient,
  rotateClientSecret,
  type ClientRegistration,
  type ClientType,
  type OAuthClientView,
} from '../api/identity-clients.js';
import type { ConsolePage, PageContext, PageResult } from '../page.js';
import { formCall, timeEl } from './ops-format.js';

const GRANTS: readonly { value: string; label: string }[] = [
  { value: 'authorization_code', label: 'Authorization code (with PKCE)' },
  { value: 'refresh_token', label: 'Refresh token' },
  { value: 'client_credentials', label: 'Client credentials (confidential only)' },
  { value: 'urn:ietf:params:oauth:grant-type:device_code', label: 'Device authorization' },
];

/** What the registration form holds, as typed (so a refused form comes back as it was). */
interface RegistrationForm {
  client_id: string;
  name: string;
  client_type: string;
  redirect_uris: string;
  grant_types: string[];
  scope: string;
  role: string;
  tenant_id: string;
  plan: string;
  dpop: boolean;
}

const EMPTY_FORM: RegistrationForm = {
  client_id: '',
  name: '',
  client_type: 'confidential',
  redirect_uris: '',
  grant_types: [],
  scope: '',
  role: 'service',
  tenant_id: '',
  plan: '',
  dpop: false,
};

export function readForm(f: URLSearchParams): RegistrationForm {
  return {
    client_id: (f.get('client_id') ?? '').trim(),
    name: (f.get('name') ?? '').trim(),
    client_type: f.get('client_type') ?? '',
    redirect_uris: f.get('redirect_uris') ?? '',
    grant_types: f.getAll('grant_types'),
    scope: (f.get('scope') ?? '').trim(),
    role: f.get('role') ?? 'service',
    tenant_id: (f.get('tenant_id') ?? '').trim(),
    plan: (f.get('plan') ?? '').trim(),
    dpop: f.get('dpop_bound_access_tokens') === 'on',
  };
}

/**
 * The registration body: empty optional fields are left out, so identity's defaults apply (a
 * generated id, the grants of the client type, the default scope); the console decides nothing
 * the registry validates.
 */
export function registrationOf(f: RegistrationForm): ClientRegistration {
  const reg: ClientRegistration = { client_type: f.client_type as ClientType };
  if (f.client_id !== '') reg.client_id = f.client_id;
  if (f.name !== '') reg.name = f.name;
  const uris = f.redirect_uris
    .split(/\r?\n/)
    .map((u) => u.trim())
    .filter((u) => u !== '');
  if (uris.length > 0) reg.redirect_uris = uris;
  if (f.grant_types.length > 0) reg.grant_types = f.grant_types;
  if (f.scope !== '') reg.scope = f.scope;
  reg.role = f.role;
  if (f.tenant_id !== '') reg.tenant_id = f.tenant_id;
  if (f.plan !== '') reg.plan = f.plan;
  if (f.dpop) reg.dpop_bound_access_tokens = true;
  return reg;
}

/** A field's problem for the redirect URI textarea also covers `redirect_uris[3]`. */
function registrationFormHtml(ctx: PageContext, f: RegistrationForm, problem?: ApiProblem): Html {
  const grantError = problem?.field === 'grant_types' ? (problem.detail ?? problem.title).replace(/^grant_types: /, '') : undefined;
  return html`<form method="post" action="/clients" class="stack" novalidate aria-label="Register a client">
    ${ctx.csrfField()}
    ${select({
      name: 'client_type',
      label: 'Client type',
      value: f.client_type,
      options: [
        { value: 'confidential', label: 'Confidential (a server that keeps a secret)' },
        { value: 'public', label: 'Public (a browser or native app: no secret, PKCE)' },
      ],
      problem,
    })}
    ${field({ name: 'client_id', label: 'Client id', value: f.client_id, hint: 'Leave empty for a generated one. Letters, digits and . _ : -', problem })}
    ${field({ name: 'name', label: 'Name', value: f.name, hint: 'Shown to users on the sign-in page. Defaults to the id.', problem })}
    ${textarea({ name: 'redirect_uris', label: 'Redirect URIs', value: f.redirect_uris, rows: 3, hint: 'One per line; https, or http on a loopback host. Needed for the authorization code grant.', problem })}
    <fieldset
      class="field${grantError !== undefined ? ' invalid' : ''}"
      ${grantError !== undefined ? html` aria-describedby="grant-types-error"` : ''}
    >
      <legend>Grant types</legend>
      <p class="hint">None ticked: the type's default (public: code and refresh; confidential: client credentials).</p>
      ${GRANTS.map((g, i) => checkbox({ name: 'grant_types', id: `f-grant-${i}`, value: g.value, label: g.label, checked: f.grant_types.includes(g.value) }))}
      ${grantError !== undefined && html`<p class="field-error" id="grant-types-error">${grantError}</p>`}
    </fieldset>
    ${field({ name: 'scope', label: 'Scopes', value: f.scope, hint: 'Space-separated scopes the client may ask for (e.g. openid profile read:orders).', problem })}
    ${select({
      name: 'role',
      label: 'Role of its own tokens',
      value: f.role,
      options: [
        { value: 'service', label: 'service' },
        { value: 'admin', label: 'admin' },
      ],
      hint: 'The role claim of tokens it gets with client credentials.',
      problem,
    })}
    ${field({ name: 'tenant_id', label: 'Tenant id', value: f.tenant_id, problem })}
    ${field({ name: 'plan', label: 'Plan', value: f.plan, problem })}
    ${checkbox({ name: 'dpop_bound_access_tokens', label: 'Require DPoP proofs on every token request', checked: f.dpop })}
    <p><button type="submit">Register client</button></p>
  </form>`;
}

function clientDetails(c: OAuthClientView): Html {
  return details([
    ['Client id', html`<code>${c.client_id}</code>`],
    ['Name', c.name],
    ['Type', c.client_type],
    ['Authentication at the token endpoint', c.token_endpoint_auth_method],
    ['Grant types', c.grant_types.join(', ')],
    [
      'Redirect URIs',
      c.redirect_uris.length === 0
        ? ''
        : html`<ul class="plain">
            ${c.redirect_uris.map((u) => html`<li><code>${u}</code></li>`)}
          </ul>`,
    ],
    ['Scopes', c.scope],
    ['Role', c.role],
    ['Tenant', c.tenant_id],
    ['Plan', c.plan],
    ['DPoP required', c.dpop_bound_access_tokens ? 'yes' : 'no'],
    ['Registered', timeEl(c.created_at)],
  ]);
}

/** The one page a secret is ever on. */
function secretPage(ctx: PageContext, title: string, clientId: string, secret: string, lead: string): PageResult {
  const r = ctx.render({
    title,
    body: html`<div class="flash info secret-once" role="status">
        <p>${lead}</p>
        <p>
          <strong>Copy the secret now: it is shown on this page only, never again.</strong> The registry keeps only its hash; if it is lost,
          replace it.
        </p>
        ${details([
          ['Client id', html`<code id="client-id">${clientId}</code>`],
          ['Client secret', html`<code id="client-secret" class="secret">${secret}</code>`],
        ])}
      </div>
      <p><a href="${href(`/clients/${encodeURIComponent(clientId)}`)}">Done: back to the client</a></p>`,
  });
  return { ...r, headers: { ...r.headers, 'cache-control': 'no-store' } };
}

function notFound(ctx: PageContext, id: string): PageResult {
  return ctx.render({
    title: 'No such client',
    status: 404,
    body: html`<p>No client is registered as <code>${id}</code>.</p>
      <p><a href="/clients">All clients</a></p>`,
  });
}

function detailPage(ctx: PageContext, c: OAuthClientView, problem?: ApiProblem, errors?: Record<string, string>): PageResult {
  const id = c.client_id;
  const rotate =
    c.client_type === 'confidential'
      ? html`<section aria-labelledby="rotate-h">
          <h2 id="rotate-h">Replace the secret</h2>
          <p>
            A new secret is made and shown once; <strong>the current one stops working at once</strong>, so the client fails until it is
            given the new one.
          </p>
          <form method="post" action="${href(`/clients/${encodeURIComponent(id)}/secret`)}" class="stack">
            ${ctx.csrfField()} ${checkbox({ name: 'confirm', label: `Yes, replace the secret of ${id} now` })}
            ${errors?.confirm !== undefined && html`<p class="field-error" id="confirm-error" role="alert">${errors.confirm}</p>`}
            <p><button type="submit" class="danger">Replace secret</button></p>
          </form>
        </section>`
      : html`<p>A public client has no secret.</p>`;
  return ctx.render({
    title: `Client ${c.name}`,
    status: errors || problem ? 422 : 200,
    ...(problem ? { problem } : {}),
    body: html`${clientDetails(c)} ${rotate}
      <p><a href="/clients">All clients</a></p>`,
  });
}

/**
 * The registry and, below it, the registration form (on the same page, so no path under /clients/
 * is taken from the client ids: any id, `new` included, has its own page).
 */
async function listPage(ctx: PageContext, form: RegistrationForm, problem?: ApiProblem): Promise<PageResult> {
  const clients = await listClients(ctx.api.identity);
  return ctx.render({
    title: 'OAuth clients',
    ...(problem ? { status: 422, problem } : {}),
    body: html`<p><a href="#register-h">Register a client</a></p>
      ${table<OAuthClientView>({
        caption: `${clients.length} registered client${clients.length === 1 ? '' : 's'}`,
        id: 'clients',
        empty: 'No client is registered yet.',
        rows: clients,
        columns: [
          {
            header: 'Client id',
            rowHeader: true,
            cell: (c) => html`<a href="${href(`/clients/${encodeURIComponent(c.client_id)}`)}">${c.client_id}</a>`,
          },
          { header: 'Name', cell: (c) => c.name },
          { header: 'Type', cell: (c) => c.client_type },
          { header: 'Grant types', cell: (c) => c.grant_types.join(', ') },
          { header: 'Role', cell: (c) => c.role },
          { header: 'Registered', cell: (c) => timeEl(c.created_at) },
        ],
      })}
      <section aria-labelledby="register-h">
        <h2 id="register-h" tabindex="-1">Register a client</h2>
        ${registrationFormHtml(ctx, form, problem)}
      </section>`,
  });
}

export const clientsPage: ConsolePage = {
  id: 'clients',
  title: 'OAuth clients',
  path: '/clients',
  register(router) {
    router.get('/clients', (ctx) => listPage(ctx, EMPTY_FORM));

    router.post('/clients', async (ctx) => {
      const form = readForm(ctx.request.form);
      const r = await formCall(() => registerClient(ctx.api.identity, registrationOf(form)));
      if (!r.ok) return listPage(ctx, form, r.problem);
      const c = r.value;
      if (c.client_secret !== undefined) {
        return secretPage(
          ctx,
          `Client ${c.client_id} registered`,
          c.client_id,
          c.client_secret,
          `The confidential client ${c.name} is registered.`,
        );
      }
      return ctx.redirect(`/clients/${encodeURIComponent(c.client_id)}`, {
        kind: 'success',
        text: `Public client ${c.client_id} registered.`,
      });
    });

    router.get('/clients/:id', async (ctx) => {
      const id = ctx.request.params[0]!;
      const c = await getClient(ctx.api.identity, id);
      return c ? detailPage(ctx, c) : notFound(ctx, id);
    });

    router.post('/clients/:id/secret', async (ctx) => {
      const id = ctx.request.params[0]!;
      if (ctx.request.form.get('confirm') !== 'on') {
        const c = await getClient(ctx.api.identity, id);
        if (!c) return notFound(ctx, id);
        return detailPage(ctx, c, undefined, { confirm: 'Tick the box to confirm: the current secret stops working at once.' });
      }
      const r = await formCall(() => rotateClientSecret(ctx.api.identity, id));
      if (!r.ok) {
        const c = await getClient(ctx.api.identity, id);
        return c ? detailPage(ctx, c, r.problem) : notFound(ctx, id);
      }
      return secretPage(
        ctx,
        `New secret for ${id}`,
        id,
        r.value.client_secret,
        `The secret of ${id} was replaced; the previous one no longer works.`,
      );
    });
  },
};
