// Example: the words of a text and how often each occurs, counted in parallel. Lines are split into
// lower-case words, keyed by the word (records with one word meet in one subtask) and summed; the
// text is bounded, so each word's count is emitted once, when the input ends.
// Run: floe run examples/wordcount.ts -p 4 -- <text file> <output folder>   (or `npm start`)
import { defineJob } from 'floe';

export default defineJob('wordcount', (env, args) => {
  env
    .readTextFile(args[0] ?? '.floe/example/corpus.txt', { splitSizeBytes: 1024 * 1024 })
    .flatMap((line) => {
      const out: [string, number][] = [];
      // Letters and digits, with inner apostrophes (don't); everything else separates words.
      for (const word of line.toLowerCase().split(/[^\p{L}\p{N}']+/u)) {
        // Outer apostrophes are not part of the word ('quoted' -> quoted); most words have none.
        let start = 0;
        let end = word.length;
        while (start < end && word.charCodeAt(start) === 39) start++;
        while (end > start && word.charCodeAt(end - 1) === 39) end--;
        if (start < end) out.push([start === 0 && end === word.length ? word : word.slice(start, end), 1]);
      }
      return out;
    })
    .name('words')
    .keyBy(([word]) => word)
    .sum(1)
    .name('count')
    // Running the example again replaces its earlier output (and only that: 'overwrite' never deletes
    // files Floe did not write).
    .writeAsText(args[1] ?? '.floe/example/wordcount', { writeMode: 'overwrite' });
});
