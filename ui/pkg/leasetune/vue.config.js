// The extension build of @rancher/shell (shell/pkg/vue.config.js at
// shell-pkg-v3.0.0), with the bundle made reproducible (see ../../build/vue.config.pkg.js).
module.exports = require('../../build/vue.config.pkg.js')(__dirname);
