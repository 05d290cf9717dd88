// Builds the dashboard into dist/ (index.html, assets/app.js, assets/app.css) for the
// control plane to embed, and fails when the first load's compressed JS+CSS exceeds the
// budget of 250 KB.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const BUDGET = 250 * 1024;
const out = 'dist/assets';
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

await build({
  entryPoints: { app: 'src/main.tsx' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2022',
  outdir: out,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync('src/index.html', 'dist/index.html');

let total = 0;
for (const f of ['app.js', 'app.css']) {
  const gz = gzipSync(readFileSync(`${out}/${f}`), { level: 9 }).length;
  total += gz;
  console.log(`${f}: ${(gz / 1024).toFixed(1)} KB gzipped`);
}
console.log(`first load: ${(total / 1024).toFixed(1)} KB of ${BUDGET / 1024} KB`);
if (total > BUDGET) {
  console.error('over the 250 KB budget for the first load');
  process.exit(1);
}
