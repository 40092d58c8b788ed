// @tier: pure
/**
 * The sidecar refuses to serve on @trufflesuite/uws-js-unofficial's pure-Node fallback (loaded
 * when UWS_USE_FALLBACK is set or no binary matches the Node ABI): shared/uws.ts requireNativeBuild.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { sourceDir } from '../harness/source.js';

const uwsModule = resolve(sourceDir(import.meta.url), '../../dist/shared/uws.js');
const probe = `import(${JSON.stringify(uwsModule)}).then((m) => { m.requireNativeBuild(); console.log('native', m.nativeBuild); })`;

t.test('the native build passes', async (t) => {
  const r = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8', env: { ...process.env, UWS_USE_FALLBACK: '' } });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /native true/);
});

t.test('the pure-Node fallback is refused with a message naming the cause', async (t) => {
  const r = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8', env: { ...process.env, UWS_USE_FALLBACK: '1' } });
  t.not(r.status, 0);
  t.match(r.stderr, /no native build loaded for this Node ABI/);
});
