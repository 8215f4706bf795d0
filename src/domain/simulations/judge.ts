// The LLM judge of simulation answers: one non-streamed `POST {LLM_BASE_URL}/chat/completions`
// to the same OpenAI-compatible server the agent uses, asking for a JSON verdict
// `{"pass": boolean, "score": number 0..1, "rationale": string}`. The rationale is recorded with
// the result. A judge that cannot be reached or answers nonsense fails the case with that reason
// (JudgeError), it never passes one.
import type { Judge, JudgeVerdict } from './evaluation.js';

export interface JudgeOptions {
  baseUrl: string;
  apiKey?: string | undefined;
  model: string;
  timeoutMs: number;
}

export class JudgeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JudgeError';
  }
}

const SYSTEM =
  'You grade the answers of a customer support agent in automated tests. ' +
  'Reply with one JSON object and nothing else: {"pass": true or false, "score": a number from 0 to 1, ' +
  '"rationale": one or two sentences explaining the grade}.';

/** The first JSON object in a model's reply (models sometimes wrap it in prose or fences). */
function parseVerdict(text: string, model: string): JudgeVerdict {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end <= start) throw new JudgeError('The LLM judge did not answer with a JSON verdict.');
  let parsed: { pass?: unknown; passed?: unknown; score?: unknown; rationale?: unknown };
  try {
    parsed = JSON.parse(text.slice(start, end + 1));
  } catch {
    throw new JudgeError('The LLM judge answered with a verdict that is not valid JSON.');
  }
  const pass = parsed.pass ?? parsed.passed;
  if (typeof pass !== 'boolean') throw new JudgeError('The LLM judge verdict has no boolean "pass".');
  const score =
    typeof parsed.score === 'number' && Number.isFinite(parsed.score) ? Math.min(1, Math.max(0, parsed.score)) : null;
  const rationale = typeof parsed.rationale === 'string' ? parsed.rationale.slice(0, 2000) : '';
  return { passed: pass, score, rationale, model };
}

export function createLlmJudge(options: JudgeOptions): Judge {
  const endpoint = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;

  async function ask(prompt: string): Promise<JudgeVerdict> {
    let response: Response;
    try {
      response = await fetch(endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
        },
        body: JSON.stringify({
          model: options.model,
          stream: false,
          temperature: 0,
          messages: [
            { role: 'system', content: SYSTEM },
            { role: 'user', content: prompt },
          ],
        }),
        signal: AbortSignal.timeout(options.timeoutMs),
      });
    } catch (error) {
      const timedOut = error instanceof Error && error.name === 'TimeoutError';
      throw new JudgeError(
        timedOut
          ? `The LLM judge did not answer within ${options.timeoutMs} ms.`
          : 'The LLM judge could not be reached.',
      );
    }
    if (!response.ok) throw new JudgeError(`The LLM judge answered ${response.status}.`);
    const body = (await response.json().catch(() => null)) as {
      choices?: { message?: { content?: string | null } }[];
    } | null;
    const content = body?.choices?.[0]?.message?.content;
    if (typeof content !== 'string') throw new JudgeError('The LLM judge answered without a message.');
    return parseVerdict(content, options.model);
  }

  return {
    compareAnswer(question, expected, actual) {
      return ask(
        'Does the ACTUAL answer give the customer the same information as the EXPECTED answer? ' +
          'Judge meaning, not wording; extra correct detail is fine, a contradiction or a missing key fact is not.\n\n' +
          `QUESTION:\n${question}\n\nEXPECTED:\n${expected}\n\nACTUAL:\n${actual}`,
      );
    },
    isDeclined(question, actual) {
      return ask(
        'The agent was expected to decline: to say it does not know or cannot answer, without inventing an answer. ' +
          'Pass if the ACTUAL answer declines; fail if it answers the question.\n\n' +
          `QUESTION:\n${question}\n\nACTUAL:\n${actual}`,
      );
    },
  };
}
