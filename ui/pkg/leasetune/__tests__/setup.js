// What Rancher's dashboard gives every page, for the component tests: the
// shell's own i18n plugin (t(), <t>, v-t: shell/plugins/i18n.js) and the
// directives its components use (shell/directives), as shell/initialize
// installs them. The store is each test's (./store.js).
import { config } from '@vue/test-utils';
import i18n from '@shell/plugins/i18n';
import cleanHtml from '@shell/directives/clean-html';

config.global.plugins = [...(config.global.plugins || []), i18n];
config.global.directives = {
  ...config.global.directives,
  'clean-html':    cleanHtml,
  // floating-vue's tooltip needs a browser layout; the tests read no tooltip.
  'clean-tooltip': {},
};

// jsdom has no canvas: the chart draws nothing, the page works without it.
HTMLCanvasElement.prototype.getContext = () => null;
