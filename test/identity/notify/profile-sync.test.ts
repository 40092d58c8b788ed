/**
 * The notifier's recipient profile follows identity (README, "Security alerts"): signup gives the
 * notifier the user's e-mail; an e-mail change (UserEmailUpdated) replaces it, keeping the phone,
 * locale and timezone the notifier already held (its PUT replaces the whole profile, so the relay
 * reads the profile first and carries them over); two changes in a row end on the latest address.
 */
import t from 'tap';
import { useTestDatabase } from '../../harness/db.js';
import { waitFor } from '../../harness/wait.js';
import { SERVICE_HEADERS, call, signup, useIdentity, useNotifier, useSandbox, waitProfile } from './helpers.js';

t.test('signup and e-mail changes reach the notifier profile; its other fields are kept', async (t) => {
  const db = await useTestDatabase(t, 'notify_profile_sync', { poolMax: 4 });
  const sandbox = await useSandbox(t);
  const notifier = await useNotifier(t, db, sandbox);
  const { identity, url } = await useIdentity(t, db, notifier.url, {}, { notifierAuth: async () => SERVICE_HEADERS });
  const profileUrl = (id: string): string => `${notifier.url}/api/v1/users/${id}/profile`;

  const userId = await signup(url, 'lin.sync@example.com', 'correct horse battery staple', 'Lin');
  const first = await waitProfile(notifier.url, userId, (p) => typeof p.email === 'string', 'the profile after signup');
  t.equal(first.email, 'lin.sync@example.com', 'signup: the notifier has the e-mail');

  // The user sets what only the notifier knows.
  const own = await call(
    profileUrl(userId),
    'PUT',
    { email: 'lin.sync@example.com', phone: '+14155550123', locale: 'fr_CA', timezone: 'Europe/Paris' },
    SERVICE_HEADERS,
  );
  t.equal(own.status, 200);

  await identity.events.users.changeEmail(userId, { newEmail: 'lin.new@example.com', reason: 'user_request', triggeredBy: userId });
  const changed = await waitProfile(notifier.url, userId, (p) => p.email === 'lin.new@example.com', 'the profile after the change');
  t.match(
    changed,
    { user_id: userId, email: 'lin.new@example.com', phone: '+14155550123', locale: 'fr_CA', timezone: 'Europe/Paris' },
    'the e-mail is replaced; phone, locale and timezone are kept',
  );

  await identity.events.users.changeEmail(userId, { newEmail: 'lin.b@example.com', reason: 'user_request', triggeredBy: userId });
  await identity.events.users.changeEmail(userId, { newEmail: 'lin.c@example.com', reason: 'user_request', triggeredBy: userId });
  await waitFor(
    async () => {
      const { rows } = await db.pool.query<{ version: number; synced_version: number }>(
        'SELECT version, synced_version FROM notifier_profile_sync WHERE user_id = $1',
        [userId],
      );
      return rows[0] && rows[0].version === 4 && rows[0].synced_version === 4;
    },
    { timeoutMs: 15_000, what: 'the fourth version of the profile to be synced' },
  );
  const last = await call(profileUrl(userId), 'GET', undefined, SERVICE_HEADERS);
  t.match(last.json, { email: 'lin.c@example.com', phone: '+14155550123', timezone: 'Europe/Paris' }, 'two changes: the latest wins');
});
