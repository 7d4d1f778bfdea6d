// The layer check over runtime/: the layer table of layers.json (written once, read here) as rules
// (layer-rules.cjs). Run by `npm run lint`.
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { rulesFor } = require('./layer-rules.cjs');

const layerTable = JSON.parse(readFileSync(join(__dirname, 'layers.json'), 'utf8'));

module.exports = {
  forbidden: rulesFor(layerTable),
  options: {
    doNotFollow: { path: ['node_modules'] },
    exclude: { path: ['^runtime/dashboard/app/.*\\.css$'] },
    // Type-only imports are dependencies too (see no-circular).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.tsx', '.js', '.mjs', '.json'] },
    skipAnalysisNotInRules: true,
    reporterOptions: { text: { highlightFocused: true } },
  },
};
