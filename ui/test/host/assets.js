#!/usr/bin/env node
// What the stand-in shell (ui/test/host) takes from @rancher/shell as the
// dashboard has it, written into OUT for the Go test to serve:
//   OUT/rancher.css         Rancher's CSS: the shell's assets/styles/app.scss
//                           compiled with sass (the shell's own build
//                           compiles it with sass-loader), its fonts
//                           (~@shell/..., ~@rancher/icons/...) served from
//                           /node_modules/ by the stand-in;
//   OUT/shell-en-us.json    the shell's translations
//                           (assets/translations/en-us.yaml), which its
//                           components use (generic.loading, ...).
//
// Usage (from ui/): node test/host/assets.js OUT
const fs = require('fs');
const path = require('path');
const sass = require('sass');
const yaml = require('js-yaml');

const ui = path.resolve(__dirname, '../..');
const shell = path.join(ui, 'node_modules/@rancher/shell');
const out = process.argv[2];

if (!out) {
  console.error('usage: node test/host/assets.js OUT'); // eslint-disable-line no-console
  process.exit(2);
}
fs.mkdirSync(out, { recursive: true });

// The shell's styles import each other as ~shell/, ~@shell/ and @shell/
// (webpack aliases) and packages as ~<package>.
const aliases = [['~@shell/', shell], ['~shell/', shell], ['@shell/', shell], ['~', path.join(ui, 'node_modules')]];
const css = sass.compile(path.join(shell, 'assets/styles/app.scss'), {
  loadPaths: [ui, path.join(ui, 'node_modules')],
  importers: [{
    findFileUrl(u) {
      const a = aliases.find(([prefix]) => u.startsWith(prefix));

      return a ? new URL(`file://${ path.join(a[1], u.slice(a[0].length)) }`) : null;
    },
  }],
  quietDeps: true,
  logger:    sass.Logger.silent,
}).css
  .replace(/url\((["']?)~@shell\//g, 'url($1/node_modules/@rancher/shell/')
  .replace(/url\((["']?)~/g, 'url($1/node_modules/')
  // A plain CSS @import of a package (xterm's), which the shell's webpack
  // build inlines: inlined here too.
  .replace(/@import ['"]node_modules\/([^'"]+\.css)['"];/g, (m, f) => fs.readFileSync(path.join(ui, 'node_modules', f), 'utf8'));

fs.writeFileSync(path.join(out, 'rancher.css'), css);
fs.writeFileSync(path.join(out, 'shell-en-us.json'),
  JSON.stringify(yaml.load(fs.readFileSync(path.join(shell, 'assets/translations/en-us.yaml'), 'utf8'))));
