// Example: the words of a text and how often each occurs, counted in parallel. Lines are split into
// lower-case words, keyed by the word (records with one word meet in one subtask) and summed; the
// text is bounded, so each word's count is emitted once, when the input ends.
// Run: floe run examples/wordcount.ts -p 4 -- <text file> <output folder>   (or `npm start`)
import { defineJob } from 'floe';

// A word: letters and digits, with apostrophes inside it (don't) but not around it ('quoted' -> quoted);
// everything else separates words.
const WORD = /[\p{L}\p{N}](?:[\p{L}\p{N}']*[\p{L}\p{N}])?/gu;

export default defineJob('wordcount', (env, args) => {
  env
    .readTextFile(args[0] ?? '.floe/example/corpus.txt', { splitSizeBytes: 1024 * 1024 })
    .flatMap((line) => (line.toLowerCase().match(WORD) ?? []).map((word): [string, number] => [word, 1]))
    .name('words')
    .keyBy(([word]) => word)
    .sum(1)
    .name('count')
    // Running the example again replaces its earlier output (and only that: 'overwrite' never deletes
    // files Floe did not write).
    .writeAsText(args[1] ?? '.floe/example/wordcount', { writeMode: 'overwrite' });
});
