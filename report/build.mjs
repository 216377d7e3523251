// Bundles each report's viewer into one classic script (IIFE): tessera inlines it into the HTML,
// and classic scripts run from file:// where ES modules would be blocked.
// Usage: node build.mjs OUT_DIR
import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const out = process.argv[2];
if (!out) {
  console.error('usage: node build.mjs OUT_DIR');
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
mkdirSync(out, { recursive: true });
for (const kind of ['segment', 'wsi', 'video']) {
  await build({
    entryPoints: [join(here, 'src', `${kind}.js`)],
    outfile: join(out, `${kind}.js`),
    bundle: true,
    format: 'iife',
    minify: true,
    legalComments: 'none',
    target: 'es2020',
    loader: { '.css': 'text' },
    logLevel: 'warning',
  });
}
