/**
 * Prints the README's configuration table from the catalogue (bin/env-catalogue.ts):
 *   npx tsc -b && node dist/bin/config-table.js
 * test/shared/config.test.ts checks the README against the same catalogue.
 */
import { ENV } from './env-catalogue.js';

const rows = Object.entries(ENV).map(([name, v]) => {
  const def = v.default === undefined || v.default === '' ? '—' : `\`${v.default}\``;
  return `| \`${name}\` | ${def} | ${v.services.join(', ')} | ${v.description.replace(/\|/g, '\\|')} |`;
});
process.stdout.write(['| Variable | Default | Services | Description |', '|---|---|---|---|', ...rows].join('\n') + '\n');
