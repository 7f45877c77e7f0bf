// The extension's vue-cli config: @rancher/shell's own for extensions
// (shell/pkg/vue.config.js at shell-pkg-v3.0.0, reached through the .shell
// link build-pkg.sh makes), with what a bundle committed into the Go
// binary needs on top: no source map (the binary would carry 1 MB more),
// and module and chunk ids that depend on the sources only, so that two
// builds of the same sources give the same bytes (`make verify-ui`).
module.exports = function(dir) {
  const config = require('../pkg/leasetune/.shell/pkg/vue.config')(dir);
  const configure = config.configureWebpack;

  config.productionSourceMap = false;
  config.configureWebpack = (webpackConfig) => {
    configure(webpackConfig);
    webpackConfig.optimization = {
      ...webpackConfig.optimization, moduleIds: 'deterministic', chunkIds: 'deterministic', realContentHash: true
    };
    // The bundle analyzer's report is not shipped (Rancher's own publish
    // script removes it too).
    webpackConfig.plugins = webpackConfig.plugins.filter((p) => p.constructor.name !== 'BundleAnalyzerPlugin');
  };
  const chain = config.chainWebpack;

  config.chainWebpack = (ctx) => {
    chain(ctx);
    ctx.plugins.delete('webpack-bundle-analyzer');
    // The shell's TypeScript sources the page bundles (its components) are
    // transpiled only (ts-loader's transpileOnly, as @vue/cli-plugin-typescript
    // sets it); their type check (fork-ts-checker) is the shell's, against
    // its own toolchain, and fails against this one's type packages.
    ctx.plugins.delete('fork-ts-checker');
  };

  return config;
};
