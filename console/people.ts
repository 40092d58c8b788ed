/**
 * People by name or e-mail instead of `user:<uuid>`: the services record who did something as a
 * subject (`user:<id>` for a signed-in operator, `key:<hash>` or `service:<name>` otherwise). A
 * page collects the subjects it is about to show, asks identity once for the users among them
 * (api/identity-users.ts), and renders each with {@link person}: the name (or e-mail), with the
 * subject itself on hover (`title`) and in `data-subject`. When identity cannot say (down, or an
 * id it does not know) the subject is shown as it is: a page never fails for want of a name.
 */
import { html, type Html } from './html.js';
import type { ServiceClient } from './api/client.js';
import { lookUpUsers } from './api/identity-users.js';

export interface Person {
  readonly name: string | null;
  readonly email: string;
}

/** user id → who. */
export type Directory = ReadonlyMap<string, Person>;

/** The user id in a subject (`user:<id>`, or a bare id when `bare`), else undefined. */
export function userIdOf(subject: string | null | undefined, bare = false): string | undefined {
  if (!subject) return undefined;
  if (subject.startsWith('user:')) return subject.slice(5) || undefined;
  return bare && !subject.includes(':') ? subject : undefined;
}

/** Asks identity who the users among `subjects` are; an empty directory when it cannot answer. */
export async function directoryFor(
  identity: ServiceClient,
  subjects: Iterable<string | null | undefined>,
  bare = false,
): Promise<Directory> {
  const ids = new Set<string>();
  for (const s of subjects) {
    const id = userIdOf(s, bare);
    if (id !== undefined) ids.add(id);
  }
  if (ids.size === 0) return new Map();
  try {
    const users = await lookUpUsers(identity, [...ids]);
    return new Map(users.map((u) => [u.user_id, { name: u.name, email: u.email }]));
  } catch {
    // A name is a convenience: the page shows the ids rather than an error.
    return new Map();
  }
}

/** The subject as a person: "Name (e-mail)" or the e-mail, the subject on hover; else the subject as it is. */
export function person(subject: string | null | undefined, dir: Directory, bare = false): Html {
  if (!subject) return html`—`;
  const id = userIdOf(subject, bare);
  const who = id !== undefined ? dir.get(id) : undefined;
  if (!who) return html`<span class="subject" data-subject="${subject}">${subject}</span>`;
  const label = who.name ? `${who.name} (${who.email})` : who.email;
  return html`<span class="person" title="${subject}" data-subject="${subject}">${label}</span>`;
}

/** The same as text (for a `title`): "Name (e-mail)", the e-mail, or the subject. */
export function personLabel(subject: string | null | undefined, dir: Directory, bare = false): string {
  if (!subject) return '—';
  const id = userIdOf(subject, bare);
  const who = id !== undefined ? dir.get(id) : undefined;
  return who ? (who.name ? `${who.name} (${who.email})` : who.email) : subject;
}

/** A short form for tight tables: the name, else the e-mail, else the subject cut to 8 characters after its kind; all of it on hover. */
export function personShort(subject: string | null | undefined, dir: Directory, bare = false): Html {
  if (!subject) return html`—`;
  const id = userIdOf(subject, bare);
  const who = id !== undefined ? dir.get(id) : undefined;
  if (who)
    return html`<span class="person" title="${subject}: ${personLabel(subject, dir, bare)}" data-subject="${subject}"
      >${who.name ?? who.email}</span
    >`;
  const short = subject.length > 16 ? `${subject.slice(0, subject.indexOf(':') + 9)}…` : subject;
  return html`<span class="subject" title="${subject}" data-subject="${subject}">${short}</span>`;
}
