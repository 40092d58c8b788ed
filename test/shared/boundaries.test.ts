// @tier: pure
/**
 * Data flows one way: the services build on shared/ and proto/, never the reverse. A file under
 * shared/ that imported a service folder would make every service compile against that service.
 */
import t from 'tap';
import { importsOf, sourcesUnder } from '../harness/imports.js';

t.test('shared/ imports only shared/ and proto/', async (t) => {
  const found = sourcesUnder('shared').flatMap((f) =>
    importsOf(f)
      .filter((i) => !i.startsWith('shared/') && !i.startsWith('proto/'))
      .map((i) => `${f} → ${i}`),
  );
  t.same(found, [], 'a file under shared/ imports a service folder');
});
