/**
 * The template errors callers narrow on. `TemplateNotFoundError` and `RenderError` are
 * `PlatformError`s, so at an HTTP edge they become problem+json on their own; the notifier's
 * workers read `reason` to dead-letter a send. `TemplateSyntaxError` is an `InternalError`: the
 * admin API turns it into `invalid_field` itself (definition.ts), and at load it is logged.
 *
 * Neither message ever contains a value from `template_data` (they may be one-time codes): only
 * variable names, template ids, locales and channels.
 */
import { InternalError, PlatformError } from '../../shared/errors.js';

/** No such template version. 422 `unknown_template` (at ingestion: the request names a template that does not exist). */
export class TemplateNotFoundError extends PlatformError {
  readonly templateId: string;
  constructor(templateId: string) {
    super('unknown_template', { field: 'template_id', detail: `template_id: no template ${JSON.stringify(templateId.slice(0, 200))}` });
    this.name = 'TemplateNotFoundError';
    this.templateId = templateId;
  }
}

export function isTemplateNotFoundError(err: unknown): err is TemplateNotFoundError {
  return err instanceof TemplateNotFoundError;
}

/**
 * Why a render failed:
 * - `missing_variable`: the template uses `{{name}}` and `template_data` (or, inside
 *   `{{#items}}`, a digest item) has no `name`; or the template uses `{{#items}}` and this is not
 *   a digest render (`variable: 'items'`);
 * - `invalid_variable`: a `template_data` (or digest item) value is not a string;
 * - `channel_missing`: the template has no part for the channel asked for;
 * - `empty_output`: the push or SMS body renders to nothing (a provider would refuse it);
 * - `sms_too_long`: the SMS needs more than {@link SMS_MAX_SEGMENTS} segments;
 * - `template_invalid`: the stored template does not parse (never for one created through the API).
 */
export type RenderFailure =
  'missing_variable' | 'invalid_variable' | 'channel_missing' | 'empty_output' | 'sms_too_long' | 'template_invalid';

/** The most segments an SMS may take (Twilio's own limit is 1,600 characters, about 10 segments). */
export const SMS_MAX_SEGMENTS = 10;

/**
 * Rendering failed. 422 `template_render_failed`. At send time the delivery fails and is
 * dead-lettered with `reason`; the renderer never retries with another locale.
 */
export class RenderError extends PlatformError {
  readonly reason: RenderFailure;
  readonly variable: string | undefined;
  constructor(
    reason: RenderFailure,
    detail: string,
    info: { variable?: string; templateId?: string; locale?: string; channel?: string } = {},
  ) {
    const extra: Record<string, unknown> = { reason };
    if (info.variable !== undefined) extra['variable'] = info.variable;
    if (info.templateId !== undefined) extra['template_id'] = info.templateId;
    if (info.locale !== undefined) extra['locale'] = info.locale;
    if (info.channel !== undefined) extra['channel'] = info.channel;
    super('template_render_failed', { detail, extra });
    this.name = 'RenderError';
    this.reason = reason;
    this.variable = info.variable;
  }
}

export function isRenderError(err: unknown): err is RenderError {
  return err instanceof RenderError;
}

/**
 * A template source that does not parse (`template_syntax_error`); `index` is the UTF-16 offset of
 * the fault. Reported as 400 `invalid_field` at creation (definition.ts); anywhere else `internal`.
 */
export class TemplateSyntaxError extends InternalError<'template_syntax_error'> {
  readonly index: number;
  constructor(message: string, index: number) {
    super('template_syntax_error', message);
    this.name = 'TemplateSyntaxError';
    this.index = index;
  }
}
