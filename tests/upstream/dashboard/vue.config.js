// The dashboard app: @rancher/shell's own build (shell/vue.config.js at
// shell-pkg-v3.0.8), with no extension built in (there is no pkg/ here):
// leasetune's page comes from its UIPlugin, as in a Rancher installation.
//
// The shell's webpack rules name cache-loader and ts-loader, which come in
// @rancher/shell's npm package itself (its bundled node_modules: cache-loader
// there, ts-loader under its @vue/cli-plugin-typescript), where webpack's
// loader lookup from the app's folder does not reach: it is told those
// folders too.
const path = require('path');

const config = require('@rancher/shell/vue.config')(__dirname, {});
const shellModules = path.join(path.dirname(require.resolve('@rancher/shell/package.json')), 'node_modules');
const loaderModules = [shellModules, path.join(shellModules, '@vue', 'cli-plugin-typescript', 'node_modules')];
const configureWebpack = config.configureWebpack;

config.configureWebpack = (webpackConfig) => {
  configureWebpack(webpackConfig);
  webpackConfig.resolveLoader = webpackConfig.resolveLoader || {};
  webpackConfig.resolveLoader.modules = [...(webpackConfig.resolveLoader.modules || ['node_modules']), ...loaderModules];
};

module.exports = config;
