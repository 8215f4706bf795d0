// The LLM judge of coverage evaluations, used when LLM_BASE_URL is configured: one question to
// the model (src/lib/judge-model.ts) per question that retrieval found passages for, asking
// whether those passages answer it. The answer must start with YES or NO.

import { askJudgeModel, JudgeError, type JudgeModelOptions } from '../../lib/judge-model.js';
import type { Passage } from '../agent/types.js';

export interface CoverageJudge {
  /** True when the passages answer the question. Throws when the model cannot be asked. */
  answers(question: string, passages: Passage[], signal?: AbortSignal): Promise<boolean>;
}

/** Passages shown to the judge, and the characters of each. */
const JUDGE_PASSAGES = 3;
const PASSAGE_CHARS = 2000;

const SYSTEM_PROMPT =
  'You check whether a support knowledge base answers a customer question. You are given the question and ' +
  'passages from the knowledge base. Reply with exactly YES if the passages contain the answer to the ' +
  'question, or exactly NO if they do not.';

export function createLlmJudge(options: JudgeModelOptions): CoverageJudge {
  return {
    async answers(question, passages, signal) {
      const shown = passages
        .slice(0, JUDGE_PASSAGES)
        .map((p, i) => `[${i + 1}] ${p.title}\n${p.content.slice(0, PASSAGE_CHARS)}`)
        .join('\n\n');
      const reply = await askJudgeModel(options, SYSTEM_PROMPT, `Question: ${question}\n\nPassages:\n${shown}`, {
        maxTokens: 3,
        signal,
      });
      const text = reply.trim().toUpperCase();
      // The word itself, not its start: "NOT SURE" or "NONE" is no verdict.
      const verdict = /^(YES|NO)\b/.exec(text)?.[1];
      if (verdict === 'YES') return true;
      if (verdict === 'NO') return false;
      throw new JudgeError(`The LLM judge answered neither YES nor NO: '${text.slice(0, 40)}'.`);
    },
  };
}
