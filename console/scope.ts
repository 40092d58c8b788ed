/**
 * The scopes the console asks for: the OpenID ones for an ID token with the operator's role,
 * e-mail and name, and one API scope. The services decide on the token's role (`admin`), not its
 * scopes; `admin:platform` says in every audit line what the console's tokens were for.
 */
export const CONSOLE_SCOPE = 'openid profile email admin:platform';
