/**
 * The notifier templates identity's notifications use, shipped to the notifier with
 * `PUT /api/v1/admin/templates/{id}` (idempotent: the identical definition again is a harmless 200,
 * even once a version has been used). `npm start` ships them (bin/start.ts); a deployment ships them
 * the same way, or with {@link shipTemplates} from any process holding service credentials.
 * Changing a text means a new version (`_v2`): a used version is immutable at the notifier.
 */

export interface TemplateDefinition {
  readonly description: string;
  readonly default_locale: string;
  readonly variants: Readonly<Record<string, Readonly<Record<string, Readonly<Record<string, string>>>>>>;
}

export const SECURITY_ALERT_TEMPLATE = 'security_alert_v1';
export const WELCOME_TEMPLATE = 'account_welcome_v1';

/** Every channel, so whichever channels the user's preferences resolve to can render. */
export const IDENTITY_TEMPLATES: Readonly<Record<string, TemplateDefinition>> = Object.freeze({
  [SECURITY_ALERT_TEMPLATE]: {
    description: 'identity: a security alert (refresh-token reuse, authorization-code reuse, password change)',
    default_locale: 'en',
    variants: {
      en: {
        push: { title: '{{title}}', body: '{{detail}}' },
        email: {
          subject: 'Security alert: {{title}}',
          text: '{{detail}}\n\nWhen: {{when}}\n\nIf this was you, there is nothing to do.',
        },
        sms: { body: 'Security alert: {{title}}. {{detail}}' },
        in_app: { title: '{{title}}', body: '{{detail}} ({{when}})' },
      },
    },
  },
  [WELCOME_TEMPLATE]: {
    description: 'identity: welcome after signup',
    default_locale: 'en',
    variants: {
      en: {
        push: { title: 'Welcome, {{name}}', body: 'Your account is ready.' },
        email: { subject: 'Welcome, {{name}}', text: 'Hello {{name}},\n\nyour account is ready. Welcome aboard!' },
        sms: { body: 'Welcome, {{name}}: your account is ready.' },
        in_app: { title: 'Welcome, {{name}}', body: 'Your account is ready.' },
      },
    },
  },
});

/**
 * PUTs every template to the notifier at `baseUrl` (the sidecar or the notifier itself) with
 * `headers` (service credentials). Throws naming the template when one is refused.
 */
export async function shipTemplates(baseUrl: string, headers: Record<string, string>, timeoutMs = 10_000): Promise<string[]> {
  const shipped: string[] = [];
  for (const [id, def] of Object.entries(IDENTITY_TEMPLATES)) {
    const res = await fetch(`${baseUrl.replace(/\/$/, '')}/api/v1/admin/templates/${id}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(def),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    if (res.status !== 200 && res.status !== 201) throw new Error(`shipping template ${id}: ${res.status} ${text.slice(0, 300)}`);
    shipped.push(id);
  }
  return shipped;
}
