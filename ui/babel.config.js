// Babel for the jest tests only (the extension build uses
// pkg/leasetune/babel.config.js, @rancher/shell's): today's syntax for the
// Node that runs them, and TypeScript for the shell's .ts sources.
module.exports = {
  presets: [
    ['@babel/preset-env', { targets: { node: 'current' } }],
    '@babel/preset-typescript',
  ],
};
