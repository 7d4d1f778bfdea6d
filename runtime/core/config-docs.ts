// The text of docs/CONFIGURATION.md, made from CONFIG_OPTIONS and the FLOE_* variable registry:
// docs/generate-configuration.mjs writes it, and test/core/config-docs.test.ts fails when the file is stale.
import { CONFIG_OPTIONS } from './config.js';
import { FloeEnvVariables, FloeEnv, type FloeEnvKey } from './floe-env.js';

const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

const shownDefault = (value: number | string): string => (typeof value === 'number' ? String(value) : value === '' ? 'unset' : `\`${value}\``);

export function configurationMarkdown(): string {
  const lines = [
    '# Configuration',
    '',
    '<!-- Generated from runtime/core/config.ts and runtime/core/floe-env.ts by `node docs/generate-configuration.mjs`; do not edit. -->',
    '',
    "Options use Flink's names where a Flink user would look for them. Pass them as `-D key=value` to `floe run` /",
    `\`floe cluster start\`, or as a JSON object in ${FloeEnv.CONFIG}; the Dispatcher hands them on to the JobManagers and`,
    'TaskExecutors it starts. An unknown key is refused naming the nearest known ones. An option that names an',
    'environment variable is also set by that variable, which wins where it is set (deployments set them).',
    '',
    '## Options',
    '',
    '| key | default | meaning | environment variable |',
    '| --- | --- | --- | --- |',
  ];
  for (const spec of Object.values(CONFIG_OPTIONS) as readonly { key: string; default: number | string; description: string; env?: FloeEnvKey }[]) {
    lines.push(`| \`${spec.key}\` | ${shownDefault(spec.default)} | ${cell(spec.description)} | ${spec.env !== undefined ? `\`${FloeEnv[spec.env]}\`` : ''} |`);
  }
  lines.push('', '## Environment variables', '', '| variable | type | read by | meaning |', '| --- | --- | --- | --- |');
  for (const [key, variable] of Object.entries(FloeEnvVariables) as [FloeEnvKey, (typeof FloeEnvVariables)[FloeEnvKey]][]) {
    lines.push(`| \`${FloeEnv[key]}\` | ${variable.type} | ${cell(variable.readBy)} | ${cell(variable.meaning)} |`);
  }
  return `${lines.join('\n')}\n`;
}
