#!/usr/bin/env node
// Builds the extension (@rancher/shell's build-pkg.sh, with
// build/vue.config.pkg.js) and lays it out as the Go binary embeds and
// serves it (pkg/uiplugin): OUT/manifest.json (name, version, main script
// and the package.json's rancher.annotations, which become the UIPlugin's
// metadata) and OUT/plugin/ (the built files, as Rancher's own publish
// script puts them under plugin/: shell/scripts/extension/publish at
// shell-pkg-v3.0.0, report.html left out as there).
//
// Usage (from ui/): node build/bundle.js [OUT]   (default ../pkg/uiplugin/bundle)
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const ui = path.resolve(__dirname, '..');
const out = path.resolve(ui, process.argv[2] || '../pkg/uiplugin/bundle');
const pkgDir = path.join(ui, 'pkg', 'leasetune');
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
const name = `${ pkg.name }-${ pkg.version }`;
const dist = path.join(ui, 'dist-pkg', name);

const build = spawnSync(path.join(ui, 'node_modules/@rancher/shell/scripts/build-pkg.sh'), [pkg.name], {
  cwd: ui, stdio: 'inherit', env: { ...process.env, NODE_ENV: 'production' }
});

if (build.status !== 0) {
  console.error(`bundle: build-pkg.sh ${ pkg.name } failed (exit ${ build.status })`); // eslint-disable-line no-console
  process.exit(1);
}

const files = fs.readdirSync(dist).filter((f) => f !== 'report.html' && !f.endsWith('.map')).sort();
const main = `${ name }.umd.min.js`;

if (!files.includes(main) || !files.includes('package.json')) {
  console.error(`bundle: ${ dist } lacks ${ main } or package.json`); // eslint-disable-line no-console
  process.exit(1);
}

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(path.join(out, 'plugin'), { recursive: true });
for (const f of files) {
  fs.copyFileSync(path.join(dist, f), path.join(out, 'plugin', f));
}
const manifest = {
  name:        pkg.name,
  version:     pkg.version,
  main,
  annotations: (pkg.rancher && pkg.rancher.annotations) || {},
};

fs.writeFileSync(path.join(out, 'manifest.json'), `${ JSON.stringify(manifest, null, 2) }\n`);
console.log(`bundle: ${ files.map((f) => `plugin/${ f }`).join(', ') } and manifest.json in ${ path.relative(process.cwd(), out) || '.' }`); // eslint-disable-line no-console
