// @tier: pure
/**
 * The uWS build's conformance table, as a test: the raw-byte cases of
 * test/limiter/fixtures/uws-conformance.ts against a plain app of the build installed as
 * `uWebSockets.js` (through shared/uws.ts, as the sidecar loads it), compared with that build's
 * column of the measured table (EXPECTED, also in limiter/README.md "Which uWS build"). A changed
 * outcome fails here first: an upgrade of the build is a measured change, and the README's table
 * and list of limitations are updated with it (bench/uws-builds.ts prints them for every build).
 */
import t from 'tap';
import { nativeBuild } from '../../shared/uws.js';
import { BUILDS, CASES, EXPECTED, installedBuild, runConformance } from './fixtures/uws-conformance.js';

const build = installedBuild();

t.test('the installed build is the one package.json pins, and it is native (not the pure-Node fallback)', async (t) => {
  t.equal(build, BUILDS[0].id, 'the build chosen in limiter/README.md "Which uWS build"');
  t.ok(
    nativeBuild,
    'shared/uws.ts loaded a native binary: @trufflesuite/uws-js-unofficial falls back to a pure-Node imitation (a console.warn only) when none matches the Node ABI',
  );
});

t.test(`every case gives the outcome measured for ${build}`, async (t) => {
  const expected = EXPECTED[build];
  if (!expected) {
    t.fail(`${build} has no column in EXPECTED: run bench/uws-builds.ts with it and add one`);
    return;
  }
  const got = await runConformance();
  for (const c of CASES) t.equal(got[c.id], expected[c.id], `${c.id}: ${c.what}`);
});
