// The extension build of @rancher/shell (shell/pkg/vue.config.js at
// shell-pkg-v3.0.8), with the bundle made reproducible (see build.js).
module.exports = require('../../build/vue.config.pkg.js')(__dirname);
