/**
 * The console's layout: a skip link, the header with the operator and the sign-out button, the
 * nav built from the registered pages (the current one marked `aria-current="page"`), the flash
 * messages the last redirect left, an API problem if the page has one, and the page's body in
 * `<main data-page="<id>">`. Everything goes through `html`, so nothing here needs escaping by hand.
 */
import { html, type Html } from './html.js';
import type { ApiProblem } from './api/problem.js';
import type { Flash, Operator } from './page.js';

export interface NavItem {
  readonly id: string;
  readonly title: string;
  readonly path: string;
}

export interface LayoutInput {
  title: string;
  body: Html;
  nav: readonly NavItem[];
  /** The current page's id (nav highlight, `data-page`); undefined on pages outside the nav. */
  current?: string;
  operator?: Operator;
  csrfToken?: string;
  flash?: readonly Flash[];
  problem?: ApiProblem;
  /** Hashed asset URLs (assets.ts). */
  assets: { css: string; js: string };
}

/** A problem from an API, in words an operator can act on. */
export function problemBox(p: ApiProblem): Html {
  return html`<div class="problem" role="alert">
    <p><strong>${p.title}</strong> <span class="code">(${p.status} ${p.code})</span></p>
    ${p.detail !== undefined && html`<p>${p.detail}</p>`}${p.field !== undefined && html`<p>Field: <code>${p.field}</code></p>`}
  </div>`;
}

export function renderLayout(i: LayoutInput): string {
  const flash = i.flash ?? [];
  return (
    '<!doctype html>\n' +
    html`<html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${i.title} · Edge console</title>
        <link rel="stylesheet" href="${i.assets.css}" />
        <script src="${i.assets.js}" defer></script>
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <header class="top">
          <p class="brand"><a href="/">Edge console</a></p>
          ${
            i.operator &&
            html`<div class="who">
              <span>Signed in as <strong>${i.operator.name ?? i.operator.email ?? i.operator.userId}</strong> (${i.operator.role})</span>
              <form method="post" action="/auth/logout">
                <input type="hidden" name="_csrf" value="${i.csrfToken ?? ''}" /><button type="submit" class="link">Sign out</button>
              </form>
            </div>`
          }
        </header>
        <div class="frame">
          ${
            i.nav.length > 0 &&
            html`<nav aria-label="Console">
              <ul>
                ${i.nav.map((n) => html`<li><a href="${n.path}" data-nav="${n.id}" ${n.id === i.current ? html` aria-current="page"` : ''}>${n.title}</a></li>`)}
              </ul>
            </nav>`
          }
          <main id="main" tabindex="-1" ${i.current !== undefined ? html` data-page="${i.current}"` : ''}>
            <h1>${i.title}</h1>
            ${flash.map((f) => html`<div class="flash ${f.kind}" role="${f.kind === 'error' ? 'alert' : 'status'}">${f.text}</div>`)}
            ${i.problem && problemBox(i.problem)} ${i.body}
          </main>
        </div>
      </body>
    </html> `.value
  );
}
