import { describe, expect, it } from 'vitest';
import { plainWordCount, topWords } from '../../bench/lib/plain-wordcount.js';
import { countWordsDirectly, generateCorpusChunks } from '../../runtime/cli/wordcount-example.js';

const sorted = (m: ReadonlyMap<string, number>) => [...m].sort((a, b) => (a[0] < b[0] ? -1 : 1));

describe('the plain wordcount of the benchmark', () => {
  it('counts the generated corpus exactly as the job rule does', () => {
    const text = [...generateCorpusChunks(512 * 1024)].join('');
    const plain = plainWordCount(Buffer.from(text, 'utf8'));
    expect(sorted(plain.counts)).toEqual(sorted(countWordsDirectly(text)));
    expect(plain.lines).toBe(text.split('\n').length - 1);
  });

  it('follows the job rule on apostrophes, case, digits and non-ASCII letters and separators', () => {
    const text = [
      "Don't ''quoted'' it's' ' '' ABC abc aBc 42 v2",
      'CAFÉ café Straße STRASSE naïve—señor año',
      'ΟΔΟΣ. ΑΣ.Β Σ:Α İstanbul x^Σ `Σ`',
      'tab\there, comma;semi!bang?q"dq)paren--dash',
      'last line without newline ÆSIR',
    ].join('\n');
    const plain = plainWordCount(Buffer.from(text, 'utf8'));
    expect(sorted(plain.counts)).toEqual(sorted(countWordsDirectly(text)));
    expect(plain.lines).toBe(5);
  });

  it('grows past its first table and arena sizes', () => {
    const words = Array.from({ length: 20_000 }, (_, i) => `w${i}x${'y'.repeat(i % 7)}`);
    const text = words.join(' ') + '\n' + words.slice(0, 100).join(' ') + '\n';
    const plain = plainWordCount(Buffer.from(text, 'utf8'));
    expect(plain.counts.size).toBe(20_000);
    expect(plain.counts.get('w5xyyyyy')).toBe(2);
    expect(plain.counts.get('w19999x')).toBe(1);
    expect(topWords(plain.counts, 2)).toEqual([
      ['w0x', 2],
      ['w10xyyy', 2],
    ]);
  });
});
