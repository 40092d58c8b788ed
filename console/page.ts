/**
 * The page interface: what a console page is and what its handlers receive. Pages are listed in
 * pages/index.ts; each registers its GET and POST handlers on a {@link PageRouter}. The router
 * (router.ts) does everything a page should not have to: it refuses requests without a signed-in
 * operator (redirecting a GET to the sign-in), checks every POST's CSRF token and Origin before the
 * handler runs, parses the form body, and turns an API error the handler did not catch into a page.
 *
 * Keep this interface stable: other modules build pages against it (console/README.md, "Pages").
 */
import type { Html } from './html.js';
import type { ConsoleApis } from './api/client.js';
import type { ApiProblem } from './api/problem.js';
import type { UploadedFile } from './multipart.js';

export interface ConsolePage {
  /** Stable identifier: the nav item's id and `data-page` on the page's `<main>` (tests select by it). */
  readonly id: string;
  /** The nav label and the default document title. */
  readonly title: string;
  /** Where the nav links to (`/quotas`); the page's routes live under it. */
  readonly path: string;
  /** Registers the page's handlers. Called once at start. */
  register(router: PageRouter): void;
}

/**
 * Patterns are console paths with `:name` segments (`/quotas/:subject`); parameters arrive
 * URL-decoded in `ctx.request.params`, in pattern order.
 */
export interface PageRouter {
  get(pattern: string, handler: PageHandler): void;
  /** Runs only after the CSRF token and Origin checks passed; the form is in `ctx.request.form`. */
  post(pattern: string, handler: PageHandler): void;
  /**
   * A `multipart/form-data` POST whose file is streamed to the handler, never held whole (the
   * segment upload; multipart.ts). The same checks as {@link post} run first, on the fields that
   * come before the file (so `csrfField()` must precede the file input); they are in
   * `ctx.request.form`. `maxBytes` caps the whole body. Optional: a router may serve no uploads.
   */
  upload?(pattern: string, handler: UploadHandler, opts: { maxBytes: number }): void;
}

/** Handles an upload form: `file` is the form's first file, unread (undefined when it had none). */
export type UploadHandler = (ctx: PageContext, file: UploadedFile | undefined) => Promise<PageResult> | PageResult;

export type PageHandler = (ctx: PageContext) => Promise<PageResult> | PageResult;

export interface PageRequest {
  readonly path: string;
  readonly params: readonly string[];
  readonly query: URLSearchParams;
  /** A POST's `application/x-www-form-urlencoded` body (empty for a GET); `_csrf` already removed. */
  readonly form: URLSearchParams;
  /** Lower-cased names. */
  readonly headers: Readonly<Record<string, string>>;
}

/** Who is signed in (from the ID token identity issued at sign-in). */
export interface Operator {
  readonly userId: string;
  readonly role: string;
  readonly email?: string;
  readonly name?: string;
}

export interface Flash {
  readonly kind: 'success' | 'info' | 'error';
  readonly text: string;
}

export interface PageView {
  /** The `<h1>` and the document title. */
  readonly title: string;
  readonly body: Html;
  /** Default 200; 422 for a form shown again with errors. */
  readonly status?: number;
  /**
   * An API's problem to show above the body (title, detail, code). Its `field`, if any, is for
   * the page's form controls (forms.ts `field(…, { problem })` puts the message beside them).
   */
  readonly problem?: ApiProblem;
}

/** An HTTP answer; pages make them with `ctx.render` or `ctx.redirect`. */
export interface PageResult {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface PageContext {
  readonly request: PageRequest;
  readonly operator: Operator;
  /** The session's CSRF token; forms carry it with {@link PageContext.csrfField}. */
  readonly csrfToken: string;
  /** The services' admin APIs, authenticated with the operator's access token. */
  readonly api: ConsoleApis;
  /** Messages the previous request left with its redirect (read once). */
  readonly flash: readonly Flash[];
  /** The page whose handler this is. */
  readonly page: ConsolePage;
  /** Milliseconds since the epoch (the console's clock). */
  now(): number;
  /** A whole page in the console layout (nav from the registered pages, flash, problem). */
  render(view: PageView): PageResult;
  /** 303 See Other to a console path (Post/Redirect/Get), with messages for the next page. */
  redirect(location: string, ...flash: Flash[]): PageResult;
  /** The hidden `_csrf` input every POST form must contain. */
  csrfField(): Html;
}
