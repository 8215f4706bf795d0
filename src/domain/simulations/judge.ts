// The LLM judge of simulation answers: one question to the model (src/lib/judge-model.ts), the
// same OpenAI-compatible server the agent uses, asking for a JSON verdict
// `{"pass": boolean, "score": number 0..1, "rationale": string}`. The rationale is recorded with
// the result. A judge that cannot be reached or answers nonsense fails the case with that reason
// (JudgeError), it never passes one.
import { askJudgeModel, JudgeError, type JudgeModelOptions } from '../../lib/judge-model.js';
import { cutText } from '../../lib/text.js';
import type { Judge, JudgeVerdict } from './evaluation.js';

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
  const rationale = typeof parsed.rationale === 'string' ? cutText(parsed.rationale, 2000) : '';
  return { passed: pass, score, rationale, model };
}

export function createLlmJudge(options: JudgeModelOptions): Judge {
  const ask = async (prompt: string) => parseVerdict(await askJudgeModel(options, SYSTEM, prompt), options.model);

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
