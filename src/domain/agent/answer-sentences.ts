// The built-in provider's answer: the part of the best passage that answers the question, a few
// sentences rather than the passage. A passage is cut into its paragraphs, and paragraphs longer
// than a few sentences into sentences; each part scores by the question's words it holds (compared
// on their first five letters, without accents, a rough stem that holds in English, French, German
// and Spanish); the best part is the answer, with the part after it while the answer is short.
// A question none of whose words appear in the passage gets the passage's opening.

/** An answer gathers parts until it is this long. */
const ANSWER_CHARS = 280;
/** Parts are paragraphs, or the sentences of a paragraph longer than this. */
const LONG_PARAGRAPH = 400;

const WORD = /[\p{L}\p{N}][\p{L}\p{M}\p{N}'’-]*/gu;

/** A word's comparable form: lower case, no accents, its first five letters. */
const stem = (word: string): string => word.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase().slice(0, 5);

const stemsOf = (text: string): Set<string> => new Set((text.match(WORD) ?? []).filter((w) => w.length >= 3).map(stem));

/** A passage's parts in order: paragraphs, long ones cut into sentences. */
export function answerParts(passage: string): string[] {
  return passage
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, ' ').trim())
    .filter((p) => p !== '')
    .flatMap((p) => (p.length > LONG_PARAGRAPH ? p.split(/(?<=[.!?])\s+(?=\p{Lu}|\d|-)/u) : [p]));
}

/** The parts of `passage` that answer `question`, in the passage's order. */
export function answerSentences(question: string, passage: string): string {
  const parts = answerParts(passage);
  if (parts.length === 0) return '';
  const asked = stemsOf(question);
  let best = 0;
  let bestScore = 0;
  parts.forEach((part, i) => {
    let score = 0;
    for (const s of stemsOf(part)) if (asked.has(s)) score++;
    if (score > bestScore) {
      best = i;
      bestScore = score;
    }
  });
  let answer = parts[best] as string;
  for (let i = best + 1; i < parts.length && answer.length < ANSWER_CHARS; i++) answer += `\n\n${parts[i]}`;
  return answer;
}
