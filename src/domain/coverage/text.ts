// The text rules of question extraction (docs/coverage-and-analytics.md): which sentences of a
// customer message are questions, when two questions are near-duplicates, and which existing
// domain a new question is closest to. Plain functions, no I/O; written here because the rules
// are small and must be stated exactly, which a general NLP library would not let us promise.
import { cutText } from '../../lib/text.js';

/** Words that carry no topic: they neither make two questions alike nor pick a domain. */
const STOPWORDS = new Set(
  (
    'a about after again all also am an and any are as at be been before being but by can could did do does ' +
    'doing for from get got had has have having he her here hers him his how i if in into is it its itself ' +
    'just me might more most must my myself no not now of off on once only or other our ours out over own ' +
    'please same she should so some such than that the their theirs them then there these they this those ' +
    'through to too under until up us very was we were what when where which while who whom why will with ' +
    'would you your yours yourself hi hello thanks thank need want know tell anyone way'
  ).split(' '),
);

/** Sentence openers that make a sentence a question even without a question mark. */
const INTERROGATIVES = new Set(
  (
    'how what why when where who whom whose which can could do does did is are was were should would will ' +
    'may might shall have has am'
  ).split(' '),
);

/** Shorter than this many words, a question says too little to be a reference question. */
export const MIN_QUESTION_WORDS = 3;
/** Longer than this, a sentence is cut (questions are stored as the customer wrote them). */
export const MAX_QUESTION_LENGTH = 500;
/** Jaccard similarity of content words at or above which two questions are near-duplicates. */
export const DUPLICATE_SIMILARITY = 0.8;
/** Share of a question's content words a domain's vocabulary must hold for the question to join it. */
export const DOMAIN_MIN_OVERLAP = 1 / 3;
export const UNCATEGORIZED = 'uncategorized';

/**
 * The content words of a text: lower-cased, accents removed, split on anything that is not a
 * letter or digit, stopwords and one-letter words dropped, a plural `s` cut from longer words.
 */
export function contentWords(text: string): Set<string> {
  const words = text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .split(/[^\p{L}\p{M}\p{N}]+/u);
  const out = new Set<string>();
  for (const word of words) {
    if (word.length < 2 || STOPWORDS.has(word)) continue;
    out.add(word.length > 3 && word.endsWith('s') && !word.endsWith('ss') ? word.slice(0, -1) : word);
  }
  return out;
}

export function jaccard(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let shared = 0;
  for (const word of a) if (b.has(word)) shared += 1;
  return shared / (a.size + b.size - shared);
}

/**
 * The questions a customer message asks: its sentences (split after `.`, `!`, `?` or a line
 * break) that end with `?` or open with an interrogative word, of at least MIN_QUESTION_WORDS
 * words, whitespace collapsed.
 */
export function extractQuestions(message: string): string[] {
  const sentences = message.split(/(?<=[.!?])\s+|\n+/);
  const questions: string[] = [];
  for (const raw of sentences) {
    const sentence = raw.replace(/\s+/g, ' ').trim();
    if (sentence === '') continue;
    const words = sentence.split(' ');
    if (words.length < MIN_QUESTION_WORDS) continue;
    const first = (words[0] ?? '').toLowerCase().replace(/[^\p{L}\p{M}]/gu, '');
    const asks = sentence.endsWith('?') || (INTERROGATIVES.has(first) && !/[.!]$/.test(sentence));
    if (!asks) continue;
    questions.push(cutText(sentence, MAX_QUESTION_LENGTH));
  }
  return questions;
}

/** Near-duplicate: same content words (Jaccard ≥ DUPLICATE_SIMILARITY), or both without any. */
export const isNearDuplicate = (a: Set<string>, b: Set<string>): boolean => jaccard(a, b) >= DUPLICATE_SIMILARITY;

/**
 * The existing domain whose vocabulary (the content words of its questions) holds the largest
 * share of the question's content words, if that share is at least DOMAIN_MIN_OVERLAP; else
 * `uncategorized`. Ties go to the domain with more questions, then to the first by name.
 */
export function closestDomain(
  words: Set<string>,
  domains: { domain: string; vocabulary: Set<string>; questionCount: number }[],
): string {
  if (words.size === 0) return UNCATEGORIZED;
  let best: { domain: string; score: number; count: number } | undefined;
  for (const { domain, vocabulary, questionCount } of domains) {
    if (domain === UNCATEGORIZED) continue;
    let shared = 0;
    for (const word of words) if (vocabulary.has(word)) shared += 1;
    const score = shared / words.size;
    if (shared === 0 || score < DOMAIN_MIN_OVERLAP) continue;
    if (
      !best ||
      score > best.score ||
      (score === best.score && questionCount > best.count) ||
      (score === best.score && questionCount === best.count && domain < best.domain)
    ) {
      best = { domain, score, count: questionCount };
    }
  }
  return best?.domain ?? UNCATEGORIZED;
}
