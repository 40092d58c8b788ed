/**
 * The console pages whose tests need nothing of the platform but its defaults (sign-in, OAuth
 * clients, the suppression list, segments), on one platform start instead of one each: a start
 * (identity, control plane, notifier, sandbox, console, two sign-ups) is most of such a file's
 * cost, and the pages do not see each other's data (sessions aside, which is why sign-in goes
 * first; no page but segments makes notifier profiles, which its rule segment counts). Each page
 * keeps its own browser, so no cookie passes from one page's tests to the next. The pages' tests
 * are in sections/.
 */
import t from 'tap';
import { startPlatform } from './platform.js';
import { signInPage } from './sections/signin.js';
import { clientsPage } from './sections/clients.js';
import { suppressionsPage } from './sections/suppressions.js';
import { segmentsPage } from './sections/segments.js';

// Everything inside one top-level test (tap ends a root that has asserted and then waits).
t.test('one platform for the sign-in, OAuth clients, suppression list and segments pages', async (t) => {
  const platform = await startPlatform(t, 'console_shared');
  // First: it counts the console's sessions, and the other pages' tests leave theirs signed in.
  await t.test('the console sign-in', (t) => signInPage(t, platform));
  await t.test('the OAuth clients page', (t) => clientsPage(t, platform));
  await t.test('the suppression list page', (t) => suppressionsPage(t, platform));
  await t.test('the segments page', (t) => segmentsPage(t, platform));
});
