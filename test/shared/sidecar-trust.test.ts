// @tier: pure
/**
 * shared/sidecar-trust.ts: the sidecar's X-Subject-Address is the client address only with the
 * right X-Subject-Secret; X-Forwarded-For is never read, whatever it says and whoever sent it.
 */
import t from 'tap';
import { sidecarTrust } from '../../shared/sidecar-trust.js';

const PEER = '127.0.0.9';
const ctx = (headers: Record<string, string>) => ({ headers, remoteAddress: PEER });
const trust = sidecarTrust('s3cret');

t.test('X-Subject-Address with the right secret is the client address', async (t) => {
  t.equal(trust.clientAddress(ctx({ 'x-subject-address': '203.0.113.5', 'x-subject-secret': 's3cret' })), '203.0.113.5');
  t.equal(trust.clientAddress(ctx({ 'x-subject-address': ' 2001:db8::1 ', 'x-subject-secret': 's3cret' })), '2001:db8::1', 'trimmed');
  t.ok(trust.vouched({ 'x-subject-secret': 's3cret' }));
});

t.test('a forged X-Subject-Address: without the secret, with a wrong one, or with SERVICE_SECRET unset, the peer counts', async (t) => {
  t.equal(trust.clientAddress(ctx({ 'x-subject-address': '203.0.113.5' })), PEER, 'no secret');
  t.equal(trust.clientAddress(ctx({ 'x-subject-address': '203.0.113.5', 'x-subject-secret': 'guess' })), PEER, 'a wrong secret');
  t.equal(trust.clientAddress(ctx({ 'x-subject-address': '203.0.113.5', 'x-subject-secret': '' })), PEER, 'an empty secret');
  const unset = sidecarTrust(undefined);
  t.equal(unset.clientAddress(ctx({ 'x-subject-address': '203.0.113.5', 'x-subject-secret': 's3cret' })), PEER, 'SERVICE_SECRET unset');
  t.notOk(unset.vouched({ 'x-subject-secret': '' }), 'unset never vouches, not even for an empty secret');
  t.notOk(sidecarTrust('').vouched({ 'x-subject-secret': '' }), 'an empty SERVICE_SECRET is no secret');
});

t.test('X-Forwarded-For is never the client address, with or without the secret', async (t) => {
  t.equal(
    trust.clientAddress(ctx({ 'x-forwarded-for': '1.1.1.1, 2.2.2.2', 'x-subject-secret': 's3cret' })),
    PEER,
    'vouched, no X-Subject-Address',
  );
  t.equal(trust.clientAddress(ctx({ 'x-forwarded-for': '1.1.1.1, 2.2.2.2' })), PEER, 'not vouched');
  t.equal(
    trust.clientAddress(ctx({ 'x-forwarded-for': '1.1.1.1, 2.2.2.2', 'x-subject-address': '198.51.100.4', 'x-subject-secret': 's3cret' })),
    '198.51.100.4',
    'vouched: X-Subject-Address, whatever X-Forwarded-For says',
  );
});

t.test('an X-Subject-Address that is not one address is not believed', async (t) => {
  for (const bad of ['', '   ', '1.1.1.1, 2.2.2.2', 'x'.repeat(65)]) {
    t.equal(trust.clientAddress(ctx({ 'x-subject-address': bad, 'x-subject-secret': 's3cret' })), PEER, JSON.stringify(bad.slice(0, 20)));
  }
  t.equal(trust.clientAddress(ctx({ 'x-subject-address': 'a'.repeat(64), 'x-subject-secret': 's3cret' })), 'a'.repeat(64), '64 characters');
});
