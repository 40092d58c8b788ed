// @tier: pure
/**
 * The README walk-through's reader (test/harness/readme-walkthrough.ts): which blocks run, where
 * steps end, what an expectation is, and what `…` matches. The README test trusts these rules, so
 * each one is pinned here on small documents, including the mismatches it must report.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../shared/paths.js';
import { isReadOnly, lastJson, mismatch, parsePattern, printsLine, substitutePorts, walkthrough } from '../harness/readme-walkthrough.js';

const doc = [
  '# Title',
  '```sh',
  'npm install',
  'npm start        # leave it running',
  '```',
  '```',
  'curl localhost:8080/not-run',
  '# 200 {"illustration":true}',
  '```',
  '```sh',
  '# prose before a command is not an expectation',
  "curl -X POST localhost:8080/a -d '{",
  '  "x": 1}\'',
  '# 201 {"id":"…",',
  '#      "n":2}',
  'curl localhost:8080/b',
  '',
  '# a blank line above: prose',
  'npm run admin -- promote a@example.com',
  '# prints: a@example.com (user …) is now an admin',
  'echo tail',
  '```',
].join('\n');

t.test('only sh blocks run; npm install/start are set-up; expectations close steps', async (t) => {
  const steps = walkthrough(doc);
  t.equal(steps.length, 4);
  t.same(steps[0]!.setup, ['install', 'start']);
  t.equal(steps[0]!.script.trim(), '');
  t.match(steps[1]!.script, /curl -X POST localhost:8080\/a/);
  t.notMatch(steps[1]!.script, /not-run/, 'a plain fence is an illustration');
  t.same(steps[1]!.expect, { at: 14, status: 201, json: '{"id":"…",     "n":2}' });
  t.match(steps[2]!.script, /curl localhost:8080\/b[\s\S]*# a blank line above: prose[\s\S]*promote/);
  t.equal(steps[2]!.expect?.line, 'a@example.com (user …) is now an admin');
  t.same([steps[3]!.script, steps[3]!.expect], ['echo tail', undefined]);
});

t.test('… matches a value, a string part, more keys, more items; anything else must be equal', async (t) => {
  const p = parsePattern('{"id":"key:46e8…","n":…,"a":[…,{"k":"x",…},…],"o":{…},…}');
  t.equal(mismatch(p, { id: 'key:46e8ff', n: 3, a: [1, { k: 'x', z: 1 }, 2], o: { q: 1 }, more: true }), undefined);
  t.match(mismatch(p, { id: 'key:0000', n: 3, a: [{ k: 'x' }], o: {} }), /\$\.id: "key:0000", expected "key:46e8…"/);
  t.match(mismatch(p, { id: 'key:46e8', n: 3, a: [{ k: 'y' }], o: {} }), /\$\.a: .* does not match/);
  const strict = parsePattern('{"status":"sent","channels":{"push":"sent"}}');
  t.match(mismatch(strict, { status: 'sent', channels: { push: 'sent' }, details: {} }), /keys the README does not show: details/);
  t.match(mismatch(strict, { status: 'queued', channels: { push: 'sent' } }), /\$\.status: "queued", expected "sent"/);
  t.match(mismatch(parsePattern('[]'), [1]), /does not match/);
  t.equal(mismatch(parsePattern('{"a":null,"b":[true,1.5]}'), { a: null, b: [true, 1.5] }), undefined);
  t.throws(() => parsePattern('{"a":1'), /pattern: /);
});

t.test('the last JSON value printed, a printed line, read-only steps, ports', async (t) => {
  t.same(lastJson('> npm banner\n{"a":1}{"b":{"c":[1]}}\n'), { b: { c: [1] } });
  t.equal(lastJson('no json here'), undefined);
  t.ok(printsLine('x (user …) is now an admin', '> banner\nx (user 6f1c) is now an admin\n'));
  t.notOk(printsLine('x is now an admin', 'x is now an admin, or not'));
  t.ok(isReadOnly('curl localhost:8080/a -H "$K"\ncurl -X GET localhost:8080/b'));
  t.notOk(isReadOnly('curl -X POST localhost:8080/a'));
  t.notOk(isReadOnly("curl localhost:8080/a -d '{}'"));
  t.notOk(isReadOnly('curl -T ids.csv localhost:8080/a'));
  t.notOk(isReadOnly('npm run quota -- list'));
  t.equal(
    substitutePorts('curl localhost:8080/x http://127.0.0.1:8083/y 127.0.0.1:50051', {
      LIMITER_PORT: 41000,
      IDENTITY_PORT: 41001,
      CONTROL_PLANE_GRPC_PORT: 41002,
    }),
    'curl localhost:41000/x http://127.0.0.1:41001/y 127.0.0.1:41002',
  );
  t.throws(() => substitutePorts('curl localhost:3000/', {}), /port 3000/);
});

t.test("README.md's walk-through reads: it starts the platform once, and every expectation parses", async (t) => {
  const steps = walkthrough(readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8'));
  t.equal(steps.filter((s) => s.setup.includes('start')).length, 1, 'one npm start');
  for (const s of steps) if (s.expect?.json) t.doesNotThrow(() => parsePattern(s.expect!.json!), `README.md:${s.expect.at}`);
  t.notOk(
    steps.some((s) => /^[^#\n]*(npm start|ADMIN_TOKEN=change|SERVICE_KEY|--data-binary @)/m.test(s.script)),
    'no second start, no made-up token, no undefined variable, no upload that sends nothing for a missing file',
  );
});
