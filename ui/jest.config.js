// jest for the extension's unit and component tests (`make test-ui`):
// jsdom, .vue files through @vue/vue3-jest, as Rancher's own dashboard
// tests them (rancher/dashboard jest.config.js at shell-pkg-v3.0.0), with
// @rancher/shell's jest 27 and @vue/test-utils 2. The shell's components
// the page uses (@shell/..., @components/...) come from
// node_modules/@rancher/shell as the extension build takes them
// (shell/pkg/vue.config.js aliases).
process.env.TZ = 'UTC';

module.exports = {
  testEnvironment:      'jsdom',
  roots:                ['<rootDir>/pkg'],
  testMatch:            ['**/*.test.js'],
  moduleFileExtensions: ['js', 'json', 'vue', 'ts'],
  moduleNameMapper:     {
    '^@shell/(.*)$':      '<rootDir>/node_modules/@rancher/shell/$1',
    '^@components/(.*)$': '<rootDir>/node_modules/@rancher/shell/rancher-components/$1',
  },
  transform: {
    '^.+\\.(js|ts)$': 'babel-jest',
    '^.+\\.vue$':     '@vue/vue3-jest',
  },
  // chart.js and the shell ship ES modules; jsdom has no canvas
  // (TradeOffChart.vue draws nothing there, see its redraw).
  transformIgnorePatterns: ['/node_modules/(?!(chart\\.js|@kurkle|@rancher/shell)/)'],
  setupFilesAfterEnv:      ['<rootDir>/pkg/leasetune/__tests__/setup.js'],
  testEnvironmentOptions:  { customExportConditions: ['node', 'node-addons'] },
  // The shell's TypeScript components: their scripts go through
  // TypeScript's transpiler (vue3-jest), their templates are plain
  // JavaScript (without ts-jest, vue3-jest babels a template compiled for
  // TypeScript with preset-env alone).
  globals:                 { 'vue-jest': { compilerOptions: { isTS: false }, transform: { '^js$': require.resolve('./build/jest-script.js') } } },
  watchman:                false,
};
