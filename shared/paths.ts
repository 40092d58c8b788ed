/**
 * The project root, whether running from source (tap's TypeScript loader) or from dist/.
 * SQL migrations and other non-code assets are read from the source tree, relative to it.
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
// shared/ in the source tree, dist/shared/ in the build.
export const PROJECT_ROOT = resolve(here, here.endsWith(join('dist', 'shared')) ? '../..' : '..');

/** `<root>/<service>/migrations`, e.g. migrationsDir('limiter/control-plane'). */
export function migrationsDir(service: string): string {
  return join(PROJECT_ROOT, service, 'migrations');
}
