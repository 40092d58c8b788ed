/** The OpenID scopes the console asks for: an ID token with the operator's role, e-mail and name. */
export const CONSOLE_SCOPE = 'openid profile email';
