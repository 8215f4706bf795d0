// How a played test case is judged (docs/simulations.md, "Evaluation"). Pure functions over what
// the agent did; the LLM judge (./judge.ts) is injected, so this module does no I/O of its own.
//
// - answer: meaning, not bytes. Without a language model: token overlap. Both texts are
//   lower-cased, accents removed, split on anything that is not a letter or digit, stop words
//   dropped and a plural `s` trimmed from words longer than three letters; the score is the F1
//   of the two token sets (2·|A∩B| / (|A|+|B|)). The case passes when the F1 is at least
//   ANSWER_F1_THRESHOLD, or when the answer holds at least ANSWER_RECALL_THRESHOLD of the
//   expected answer's tokens (the built-in agent answers with a whole passage, longer than the
//   sentence a tester writes). With a language model configured, the LLM judge decides and
//   its rationale is recorded.
// - tool_call: the expected tool was called, and its arguments include the expected ones
//   (a subset: nested objects compared the same way, arrays element by element, and a number
//   equal to a numeric string, since `key=value` arguments arrive as text).
// - handoff: the conversation was handed to the expected agent.
// - no_answer: the agent declined (the engine's "don't know" path; with a language model, the
//   judge also recognises a declined answer).

import type { SimulationExpectedType } from '../../db/index.js';
import type { TraceRecord } from '../agent/trace-store.js';

export const ANSWER_F1_THRESHOLD = 0.5;
export const ANSWER_RECALL_THRESHOLD = 0.8;

/** English function words that carry no meaning for the comparison. */
const STOP_WORDS = new Set(
  (
    'a an the and or but if then else of to in on at by for with from about as into onto over under ' +
    'is are was were be been being am do does did doing have has had having will would shall should ' +
    'can could may might must it its it’s this that these those there here i me my mine we us our ' +
    'you your yours he him his she her they them their what which who whom whose when where why how ' +
    'all any both each few more most other some such no nor not only own same so than too very just ' +
    'also up down out off again further once s t don’t dont isn’t isnt please thanks thank hi hello'
  ).split(/\s+/),
);

/** The meaningful tokens of a text (see the module comment). */
export function tokens(text: string): Set<string> {
  const words = text
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase()
    .split(/[^\p{L}\p{M}\p{N}]+/u)
    .filter((w) => w !== '' && !STOP_WORDS.has(w))
    .map((w) => (w.length > 3 && w.endsWith('s') && !w.endsWith('ss') ? w.slice(0, -1) : w));
  return new Set(words);
}

export interface Similarity {
  f1: number;
  /** Share of the expected answer's tokens found in the answer. */
  recall: number;
  passed: boolean;
}

const round = (n: number) => Math.round(n * 1000) / 1000;

export function answerSimilarity(expected: string, actual: string): Similarity {
  const want = tokens(expected);
  const got = tokens(actual);
  if (want.size === 0 || got.size === 0) {
    const same = want.size === got.size;
    return { f1: same ? 1 : 0, recall: same ? 1 : 0, passed: same };
  }
  let common = 0;
  for (const token of want) if (got.has(token)) common += 1;
  const f1 = (2 * common) / (want.size + got.size);
  const recall = common / want.size;
  return {
    f1: round(f1),
    recall: round(recall),
    passed: f1 >= ANSWER_F1_THRESHOLD || recall >= ANSWER_RECALL_THRESHOLD,
  };
}

/** Whether `actual` includes `expected` (see the module comment). */
export function includesArgs(actual: unknown, expected: unknown): boolean {
  if (expected === null || typeof expected !== 'object') {
    if (expected === actual) return true;
    const scalar = (v: unknown) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
    return scalar(expected) && scalar(actual) && String(expected) === String(actual);
  }
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((item, i) => includesArgs(actual[i], item))
    );
  }
  if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
  const got = actual as Record<string, unknown>;
  return Object.entries(expected as Record<string, unknown>).every(
    ([key, value]) => Object.hasOwn(got, key) && includesArgs(got[key], value),
  );
}

/** What the agent did over the whole case (every turn of the question and its steps). */
export interface CaseOutcome {
  /** The agent's last answer text. */
  answer: string;
  /** Status of the last turn played (COMPLETED, FAILED, …). */
  turn_status: string;
  error: { code: string; message: string } | null;
  tool_calls: { name: string; type: string; arguments: Record<string, unknown>; status: string; output: unknown }[];
  handoff: { agent_id: string; agent_name: string } | null;
  /** The agent took its "don't know" path (or, with a language model, the judge said it declined). */
  declined: boolean;
  citations: { document_id: string; title: string }[];
  turns: number;
  /** The simulated conversation, message by message (the conversation itself is not kept). */
  transcript: { author: 'customer' | 'agent'; content: string; status: string | null; message_id?: string }[];
  /** The trace of each agent turn (`message_id` in the transcript), copied when the case is recorded. */
  traces?: TraceRecord[];
}

export interface Expectation {
  expected_type: SimulationExpectedType;
  expected_answer: string | null;
  expected_tool_name: string | null;
  expected_tool_args: Record<string, unknown>;
  expected_agent_id: string | null;
  expected_agent_name?: string | null;
}

export interface Verdict {
  passed: boolean;
  reason: string;
  score: number | null;
  evaluation: { method: 'token_overlap' | 'llm_judge' | 'rules'; rationale: string | null; [k: string]: unknown };
}

/** What an LLM judge answers about one case. */
export interface JudgeVerdict {
  passed: boolean;
  score: number | null;
  rationale: string;
  model: string;
}

export interface Judge {
  /** Whether `actual` gives the meaning of `expected` to `question`. */
  compareAnswer(question: string, expected: string, actual: string): Promise<JudgeVerdict>;
  /** Whether `actual` declines to answer `question` (says it does not know). */
  isDeclined(question: string, actual: string): Promise<JudgeVerdict>;
}

const describeCalls = (outcome: CaseOutcome) =>
  outcome.tool_calls.length === 0
    ? 'it called no tool'
    : `it called ${outcome.tool_calls.map((c) => c.name).join(', ')}`;

const rules = (passed: boolean, reason: string): Verdict => ({
  passed,
  reason,
  score: null,
  evaluation: { method: 'rules', rationale: null },
});

/** Judges a played case against its expectation; `judge` is the LLM judge when one is configured. */
export async function evaluate(
  question: string,
  expectation: Expectation,
  outcome: CaseOutcome,
  judge: Judge | undefined,
): Promise<Verdict> {
  if (outcome.turn_status !== 'COMPLETED') {
    const why = outcome.error ? `${outcome.error.code}: ${outcome.error.message}` : outcome.turn_status;
    return rules(false, `The agent's turn did not complete (${why}).`);
  }
  switch (expectation.expected_type) {
    case 'answer': {
      const expected = expectation.expected_answer ?? '';
      if (outcome.handoff)
        return rules(false, `The agent handed the conversation to ${outcome.handoff.agent_name} instead of answering.`);
      if (outcome.declined) return rules(false, 'The agent declined to answer (it said it does not know).');
      if (judge) {
        const verdict = await judge.compareAnswer(question, expected, outcome.answer);
        return {
          passed: verdict.passed,
          reason: verdict.passed
            ? 'The LLM judge found the answer matches the expected answer.'
            : 'The LLM judge found the answer does not match the expected answer.',
          score: verdict.score,
          evaluation: { method: 'llm_judge', rationale: verdict.rationale, model: verdict.model },
        };
      }
      const similarity = answerSimilarity(expected, outcome.answer);
      const detail = `token F1 ${similarity.f1}, recall of the expected answer ${similarity.recall}; thresholds F1 ≥ ${ANSWER_F1_THRESHOLD} or recall ≥ ${ANSWER_RECALL_THRESHOLD}`;
      return {
        passed: similarity.passed,
        reason: similarity.passed
          ? `The answer matches the expected answer (${detail}).`
          : `The answer does not match the expected answer (${detail}).`,
        score: similarity.f1,
        evaluation: {
          method: 'token_overlap',
          rationale: null,
          f1: similarity.f1,
          recall: similarity.recall,
          f1_threshold: ANSWER_F1_THRESHOLD,
          recall_threshold: ANSWER_RECALL_THRESHOLD,
        },
      };
    }
    case 'tool_call': {
      const name = expectation.expected_tool_name ?? '';
      const calls = outcome.tool_calls.filter((c) => c.name === name);
      if (calls.length === 0) return rules(false, `The agent did not call '${name}' (${describeCalls(outcome)}).`);
      const matching = calls.find((c) => includesArgs(c.arguments, expectation.expected_tool_args));
      if (!matching) {
        return rules(
          false,
          `The agent called '${name}' with ${JSON.stringify(calls[0]?.arguments ?? {})}, which does not include the expected arguments ${JSON.stringify(expectation.expected_tool_args)}.`,
        );
      }
      return rules(true, `The agent called '${name}' with the expected arguments.`);
    }
    case 'handoff': {
      const wanted = expectation.expected_agent_id;
      const label = expectation.expected_agent_name ?? wanted;
      if (!outcome.handoff) return rules(false, `The agent did not hand the conversation over (expected ${label}).`);
      if (outcome.handoff.agent_id !== wanted) {
        return rules(false, `The agent handed the conversation to ${outcome.handoff.agent_name}, not ${label}.`);
      }
      return rules(true, `The agent handed the conversation to ${outcome.handoff.agent_name}.`);
    }
    case 'no_answer': {
      if (outcome.handoff)
        return rules(false, `The agent handed the conversation to ${outcome.handoff.agent_name} instead of declining.`);
      if (outcome.tool_calls.length > 0)
        return rules(false, `The agent acted instead of declining (${describeCalls(outcome)}).`);
      if (outcome.declined) return rules(true, 'The agent declined to answer, as expected.');
      if (judge) {
        const verdict = await judge.isDeclined(question, outcome.answer);
        if (verdict.passed) outcome.declined = true;
        return {
          passed: verdict.passed,
          reason: verdict.passed
            ? 'The LLM judge found the agent declined to answer, as expected.'
            : 'The LLM judge found the agent answered instead of declining.',
          score: verdict.score,
          evaluation: { method: 'llm_judge', rationale: verdict.rationale, model: verdict.model },
        };
      }
      return rules(false, 'The agent answered instead of declining.');
    }
  }
}
