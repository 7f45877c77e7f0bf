// The dashboard app: @rancher/shell's own build (shell/vue.config.js at
// shell-pkg-v3.0.8), with no extension built in (there is no pkg/ here):
// leasetune's page comes from its UIPlugin, as in a Rancher installation.
module.exports = require('@rancher/shell/vue.config')(__dirname, {});
