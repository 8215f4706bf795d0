// The language model behind the LLM judges (coverage evaluations and simulation answers): one
// non-streamed `POST {LLM_BASE_URL}/chat/completions` on the plain OpenAI-compatible wire format
// (as the agent's provider speaks it), rather than a client library, so any such server works.
// Whatever keeps a verdict from coming back is a JudgeError with a readable reason.

export class JudgeError extends Error {
  override name = 'JudgeError';
}

export interface JudgeModelOptions {
  baseUrl: string;
  apiKey?: string | undefined;
  model: string;
  timeoutMs: number;
}

/** Asks the model once and returns its reply's text. */
export async function askJudgeModel(
  options: JudgeModelOptions,
  system: string,
  user: string,
  { maxTokens, signal }: { maxTokens?: number; signal?: AbortSignal | undefined } = {},
): Promise<string> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  let response: Response;
  try {
    response = await fetch(`${options.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
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
        ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: user },
        ],
      }),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
  } catch (error) {
    if (timeout.aborted) throw new JudgeError(`The LLM judge did not answer within ${options.timeoutMs} ms.`);
    throw new JudgeError(`The LLM judge could not be reached: ${(error as Error).message}`);
  }
  if (!response.ok) throw new JudgeError(`The LLM judge answered HTTP ${response.status}.`);
  const body = (await response.json().catch(() => undefined)) as
    | { choices?: { message?: { content?: string | null } }[] }
    | undefined;
  const content = body?.choices?.[0]?.message?.content;
  if (typeof content !== 'string') throw new JudgeError('The LLM judge answered without a message.');
  return content;
}
