// The JavaScript step of @vue/vue3-jest for the scripts of .vue files in
// the jest tests: babel-jest with the project's babel.config.js. vue3-jest
// 27's own passes an empty inputSourceMap after TypeScript, which the
// @babel/core the shell brings refuses.
module.exports = require('babel-jest').default.createTransformer();
