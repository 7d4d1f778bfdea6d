// The rules of a layer table as dependency-cruiser rules: no import from a higher layer, none between the
// folders of one layer, none from the runtime to what sits above it, no import circles. The layer check
// (.dependency-cruiser.cjs, with layers.json) and its own test (test/lint/layers.test.ts, with a fixture
// tree) make their rules here.
const escapeRegex = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The rules for `layers` (lowest first) of folders under `root`, with `above` the folders beside it that sit above all. */
function rulesFor({ layers, above }, root = 'runtime') {
  const forbidden = [];
  layers.forEach((layer, i) => {
    const higher = layers.slice(i + 1).flat();
    for (const folder of layer) {
      const peers = layer.filter((f) => f !== folder);
      if (higher.length > 0) {
        forbidden.push({
          name: `layer-up:${folder}`,
          comment: `${root}/${folder}/ (layer ${i}) imports a higher layer (${higher.join(', ')}): move the shared type or function down, or invert the dependency with a port`,
          severity: 'error',
          from: { path: `^${escapeRegex(root)}/${escapeRegex(folder)}/` },
          to: { path: `^${escapeRegex(root)}/(${higher.map(escapeRegex).join('|')})/` },
        });
      }
      if (peers.length > 0) {
        forbidden.push({
          name: `layer-peer:${folder}`,
          comment: `${root}/${folder}/ (layer ${i}) imports a peer of its own layer (${peers.join(', ')}): peers talk through a lower layer`,
          severity: 'error',
          from: { path: `^${escapeRegex(root)}/${escapeRegex(folder)}/` },
          to: { path: `^${escapeRegex(root)}/(${peers.map(escapeRegex).join('|')})/` },
        });
      }
    }
  });
  const known = layers.flat();
  forbidden.push(
    {
      name: 'layer-unknown-folder',
      comment: `a folder of ${root}/ that layers.json does not place: add it to a layer there`,
      severity: 'error',
      from: { path: `^${escapeRegex(root)}/[^/]+/`, pathNot: `^${escapeRegex(root)}/(${known.map(escapeRegex).join('|')})/` },
      to: {},
    },
    {
      name: 'runtime-imports-above',
      comment: `a ${root}/ file imports from ${above.join('/, ')}/, which sit above the runtime (tests, benchmarks, the CDK app and the Lambda handlers use the runtime, never the other way)`,
      severity: 'error',
      from: { path: `^${escapeRegex(root)}/` },
      to: { path: `^(${above.map(escapeRegex).join('|')})/` },
    },
    {
      name: 'no-circular',
      comment:
        'an import circle: type-only imports count too (a circle of types still ties the modules together); move what both need into one of them or a lower module',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  );
  return forbidden;
}

module.exports = { rulesFor };
