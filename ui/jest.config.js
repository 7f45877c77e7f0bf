// jest for the extension's unit and component tests (`make test-ui`):
// jsdom, .vue files through @vue/vue3-jest, as Rancher's own dashboard
// tests them (rancher/dashboard jest.config.js at shell-pkg-v3.0.8), with
// @rancher/shell's jest 27 and @vue/test-utils 2.
process.env.TZ = 'UTC';

module.exports = {
  testEnvironment:      'jsdom',
  roots:                ['<rootDir>/pkg'],
  testMatch:            ['**/*.test.js'],
  moduleFileExtensions: ['js', 'json', 'vue'],
  transform:            {
    '^.+\\.js$':  'babel-jest',
    '^.+\\.vue$': '@vue/vue3-jest',
  },
  // chart.js ships ES modules; jsdom has no canvas (TradeOffChart.vue
  // draws nothing there, see its mountChart).
  transformIgnorePatterns: ['/node_modules/(?!(chart\\.js|@kurkle)/)'],
  testEnvironmentOptions:  { customExportConditions: ['node', 'node-addons'] },
  watchman:                false,
};
