// The LLM judge of coverage evaluations, used when LLM_BASE_URL is configured: one
// non-streaming `POST {LLM_BASE_URL}/chat/completions` per question that retrieval found
// passages for, asking whether those passages answer it. The answer must start with YES or NO.
// Written against the plain chat-completions wire format (as the agent's openai provider is)
// rather than a client library, so any OpenAI-compatible server works.
import type { Passage } from '../../agent/types.js';

export interface CoverageJudge {
  /** True when the passages answer the question. Throws when the model cannot be asked. */
  answers(question: string, passages: Passage[], signal?: AbortSignal): Promise<boolean>;
}

export interface LlmJudgeOptions {
  baseUrl: string;
  apiKey?: string | undefined;
  model: string;
  timeoutMs: number;
}

/** Passages shown to the judge, and the characters of each. */
const JUDGE_PASSAGES = 3;
const PASSAGE_CHARS = 2000;

const SYSTEM_PROMPT =
  'You check whether a support knowledge base answers a customer question. You are given the question and ' +
  'passages from the knowledge base. Reply with exactly YES if the passages contain the answer to the ' +
  'question, or exactly NO if they do not.';

export class JudgeError extends Error {
  override name = 'JudgeError';
}

export function createLlmJudge(options: LlmJudgeOptions): CoverageJudge {
  const endpoint = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  return {
    async answers(question, passages, signal) {
      const shown = passages
        .slice(0, JUDGE_PASSAGES)
        .map((p, i) => `[${i + 1}] ${p.title}\n${p.content.slice(0, PASSAGE_CHARS)}`)
        .join('\n\n');
      const timeout = AbortSignal.timeout(options.timeoutMs);
      let response: Response;
      try {
        response = await fetch(endpoint, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
          },
          body: JSON.stringify({
            model: options.model,
            temperature: 0,
            max_tokens: 3,
            stream: false,
            messages: [
              { role: 'system', content: SYSTEM_PROMPT },
              { role: 'user', content: `Question: ${question}\n\nPassages:\n${shown}` },
            ],
          }),
          signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        });
      } catch (error) {
        throw new JudgeError(`The language model could not be reached: ${(error as Error).message}`);
      }
      if (!response.ok) throw new JudgeError(`The language model answered HTTP ${response.status}.`);
      const body = (await response.json().catch(() => undefined)) as
        | { choices?: { message?: { content?: string | null } }[] }
        | undefined;
      const text = body?.choices?.[0]?.message?.content?.trim().toUpperCase() ?? '';
      if (text.startsWith('YES')) return true;
      if (text.startsWith('NO')) return false;
      throw new JudgeError(`The language model answered neither YES nor NO: '${text.slice(0, 40)}'.`);
    },
  };
}
