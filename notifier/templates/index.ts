/**
 * Templates (README, "Templates"): versioned ids `<name>_v<N>`, locale variants `<template_id>.<locale>`,
 * channel-specific rendering, and the operator API. What the rest of the notifier calls:
 *
 * - `renderTemplate(pool, {templateId, locale, channel, data, items?, count?})` → {@link Rendered}
 *   (with `items`: a digest, see syntax.ts), or throws
 *   {@link TemplateNotFoundError} (422 `unknown_template`) or {@link RenderError}
 *   (`template_render_failed`, with a `reason`: dead-letter that send, never another locale);
 * - `templateExists(pool, templateId)`, `markTemplateUsed(pool | client, templateId)`;
 * - `registerTemplateRoutes(app, edge, pool, caller)`.
 */
export { renderTemplate, templateExists, markTemplateUsed, type RenderRequest, type Rendered } from './catalog.js';
export {
  RenderError,
  TemplateNotFoundError,
  isRenderError,
  isTemplateNotFoundError,
  SMS_MAX_SEGMENTS,
  type RenderFailure,
} from './errors.js';
export { CHANNELS, PUSH_BODY_MAX, PUSH_TITLE_MAX, type Channel, type RenderedContent } from './render.js';
export { smsSize, type SmsSize, type SmsEncoding } from './sms.js';
export { canonicalLocale, localeChain } from './locale.js';
export { parseTemplateId } from './template-id.js';
export type { TemplateData } from './syntax.js';
export type { Queryable } from './store.js';
export { registerTemplateRoutes, TEMPLATE_ADMIN_ROLES, type TemplateRouteOptions } from './routes.js';
