/**
 * The scopes the console asks for: the OpenID ones for an ID token with the operator's role,
 * e-mail and name, and one API scope. The services decide on the token's role (`admin`), not its
 * scopes, but an access token must carry a non-empty `scope` to verify at all (shared/jwt's
 * claims; identity leaves `scope` empty when a grant has only OpenID scopes), so the console's
 * tokens carry `admin:platform`, which also says in every audit line what they were for.
 */
export const CONSOLE_SCOPE = 'openid profile email admin:platform';
