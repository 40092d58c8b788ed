/**
 * The client registry's admin API, under `/auth/admin/clients` (JSON, problem+json errors):
 *
 * - `POST /auth/admin/clients`: register (body: see `validateRegistration`); 201 with the client
 *   and, for a confidential client, its `client_secret`, shown this once and never again;
 * - `GET /auth/admin/clients`, `GET /auth/admin/clients/:id`: read (never a secret or its hash);
 * - `POST /auth/admin/clients/:id/secret`: a new secret (the old one stops working at once);
 * - `DELETE /auth/admin/clients/:id`: remove.
 *
 * Callers authenticate with `Authorization: Bearer <IDENTITY_ADMIN_TOKEN>` or an access token of
 * ours whose role is `admin`.
 */
import { PlatformError } from '../../shared/errors.js';
import { jsonBody, type Handler, type RequestContext } from '../../shared/http.js';
import { requireAdmin as requireAdminFor } from '../oauth/admin-auth.js';
import type { OAuthRuntime } from '../oauth/runtime.js';
import { clientView, validateRegistration } from './client.js';
import { deleteClient, getClient, listClients, registerClient, rotateClientSecret } from './client-store.js';

const NO_STORE = { 'cache-control': 'no-store' };

function requireAdmin(rt: OAuthRuntime, ctx: RequestContext): Promise<void> {
  return requireAdminFor(rt, ctx, 'the client registry');
}

function notFound(): PlatformError {
  return new PlatformError('not_found', { detail: 'no such client' });
}

export function adminClientRoutes(rt: OAuthRuntime): { method: 'get' | 'post' | 'del'; pattern: string; handler: Handler }[] {
  const base = '/auth/admin/clients';
  return [
    {
      method: 'post',
      pattern: base,
      handler: async (ctx) => {
        await requireAdmin(rt, ctx);
        const reg = validateRegistration(jsonBody(ctx));
        // An id token's aud is its client id: a client named like the API audience would get id
        // tokens whose aud a resource server accepts (typ still refuses them; this is the second net).
        if (reg.clientId === rt.settings.audience) {
          throw new PlatformError('invalid_field', {
            field: 'client_id',
            detail: 'client_id: must differ from the API audience (JWT_AUDIENCE)',
          });
        }
        const { client, clientSecret } = await registerClient(rt.pool, reg, rt.clock.now());
        const body = clientView(client);
        if (clientSecret !== undefined) body.client_secret = clientSecret;
        rt.log.info({ client_id: client.clientId, client_type: client.type }, 'oauth client registered');
        return { status: 201, body, headers: NO_STORE };
      },
    },
    {
      method: 'get',
      pattern: base,
      handler: async (ctx) => {
        await requireAdmin(rt, ctx);
        return { body: { clients: (await listClients(rt.pool)).map(clientView) }, headers: NO_STORE };
      },
    },
    {
      method: 'get',
      pattern: `${base}/:id`,
      handler: async (ctx) => {
        await requireAdmin(rt, ctx);
        const c = await getClient(rt.pool, ctx.params[0]!);
        if (!c) throw notFound();
        return { body: clientView(c), headers: NO_STORE };
      },
    },
    {
      method: 'post',
      pattern: `${base}/:id/secret`,
      handler: async (ctx) => {
        await requireAdmin(rt, ctx);
        const id = ctx.params[0]!;
        const secret = await rotateClientSecret(rt.pool, id, rt.clock.now());
        rt.invalidateClient(id);
        if (secret === undefined) {
          if (await getClient(rt.pool, id))
            throw new PlatformError('invalid_field', { field: 'client_id', detail: 'client_id: a public client has no secret' });
          throw notFound();
        }
        rt.log.info({ client_id: id }, 'oauth client secret replaced');
        return { body: { client_id: id, client_secret: secret }, headers: NO_STORE };
      },
    },
    {
      method: 'del',
      pattern: `${base}/:id`,
      handler: async (ctx) => {
        await requireAdmin(rt, ctx);
        const deleted = await deleteClient(rt.pool, ctx.params[0]!);
        rt.invalidateClient(ctx.params[0]!);
        if (!deleted) throw notFound();
        rt.log.info({ client_id: ctx.params[0] }, 'oauth client deleted');
        return { status: 204 };
      },
    },
  ];
}
