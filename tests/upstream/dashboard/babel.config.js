// @rancher/shell's babel configuration, as an app made from its skeleton has it.
module.exports = require('@rancher/shell/babel.config.js');
