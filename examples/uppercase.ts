// Example: the ERROR lines of a text file, upper-cased, written as text part files into a folder.
// Run: floe run examples/uppercase.ts -- <input file> <output folder>
import { defineJob } from 'floe';

export default defineJob('uppercase-errors', (env, args) => {
  env
    .readTextFile(args[0] ?? 'input.txt')
    .filter((line) => line.includes('ERROR'))
    .name('errors')
    .map((line) => line.toUpperCase())
    .setParallelism(4)
    .writeAsText(args[1] ?? 'out');
});
