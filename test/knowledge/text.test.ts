// Text cut to a bound in characters (code points), never inside a surrogate pair: the question
// extraction, generated titles, crawled titles and stored answers all cut this way.
import { describe, expect, it } from 'vitest';
import { extractQuestions, MAX_QUESTION_LENGTH } from '../../src/domain/coverage/text.js';
import { cutText } from '../../src/lib/text.js';

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

describe('cutText', () => {
  it('keeps at most max characters, counting a pair as one, and never splits one', () => {
    expect(cutText('abc', 5)).toBe('abc');
    expect(cutText('abcdef', 3)).toBe('abc');
    expect(cutText('ab😀cd', 3)).toBe('ab😀');
    expect(cutText('ab😀cd', 2)).toBe('ab');
    expect(cutText('😀😀😀', 2)).toBe('😀😀');
    expect(cutText('', 0)).toBe('');
    for (let max = 0; max <= 12; max++) {
      const cut = cutText('a😀b😀😀c😀', max);
      expect(LONE_SURROGATE.test(cut)).toBe(false);
      expect(Array.from(cut).length).toBe(Math.min(max, 7));
    }
  });

  it('a question whose bound falls on an emoji keeps it whole: cut in characters, not UTF-16 units', () => {
    // The emoji is the last character allowed, and the last two UTF-16 units.
    const [question] = extractQuestions(`How do I ${'b'.repeat(MAX_QUESTION_LENGTH - 10)}😀 fix it?`);
    expect(question).toBe(`How do I ${'b'.repeat(MAX_QUESTION_LENGTH - 10)}😀`);
    expect(Array.from(question ?? '')).toHaveLength(MAX_QUESTION_LENGTH);
    const [emoji] = extractQuestions(`How do I ${'😀'.repeat(MAX_QUESTION_LENGTH)} fix it?`);
    expect(Array.from(emoji ?? '')).toHaveLength(MAX_QUESTION_LENGTH);
    expect(LONE_SURROGATE.test(emoji ?? '')).toBe(false);
  });
});
