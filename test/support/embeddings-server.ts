// A deterministic OpenAI-compatible embeddings server for tests (`POST /v1/embeddings`): a bag of
// words hashed into 256 dimensions, a few synonyms sharing their word's dimension, so texts sharing
// words or synonyms are close. Each test can make it fail, hang or hold its answers.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export const DIMENSIONS = 256;
export const MODEL = 'test-embed';

/** Words embedded as another: a question may say what a passage says in other words. */
const SYNONYMS: Record<string, string> = { shortcut: 'link', shortcuts: 'link', links: 'link' };

/**
 * A bag of words hashed into 256 dimensions (FNV-1a), normalised: texts sharing words (or synonyms)
 * are close.
 */
export function bagOfWords(text: string): number[] {
  const vector = new Array<number>(DIMENSIONS).fill(0);
  for (const found of text.toLowerCase().match(/\p{L}+/gu) ?? []) {
    const word = SYNONYMS[found] ?? found;
    let hash = 0x811c9dc5;
    for (const char of word) hash = Math.imul(hash ^ (char.codePointAt(0) ?? 0), 0x01000193) >>> 0;
    vector[hash % DIMENSIONS] = (vector[hash % DIMENSIONS] ?? 0) + 1;
  }
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0)) || 1;
  return vector.map((x) => x / norm);
}

export function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((x, i) => {
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  });
  return dot / Math.sqrt(na * nb);
}

export interface Received {
  path: string;
  authorization: string | undefined;
  model: string;
  input: string[];
}

/**
 * How the server answers a request: `undefined` answers the embeddings; `hang` never; `hold` when
 * `release()` is called; otherwise this status and body.
 */
export type Behaviour = (
  request: Received,
) => { status: number; body: unknown; headers?: Record<string, string> } | 'hang' | 'hold' | undefined;

export async function embeddingsServer() {
  const received: Received[] = [];
  let behaviour: Behaviour = () => undefined;
  let held: (() => void)[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const parsed = JSON.parse(body) as { model: string; input: string[] };
      const request = {
        path: req.url ?? '',
        authorization: req.headers.authorization,
        model: parsed.model,
        input: parsed.input,
      };
      received.push(request);
      const answer = behaviour(request);
      const embeddings = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'list',
            model: parsed.model,
            // In reverse: the client must order them by `index`.
            data: parsed.input
              .map((text, index) => ({ object: 'embedding', index, embedding: bagOfWords(text) }))
              .reverse(),
            usage: { prompt_tokens: 0, total_tokens: 0 },
          }),
        );
      };
      if (answer === 'hang') return;
      if (answer === 'hold') {
        held.push(embeddings);
        return;
      }
      if (answer) {
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        res.end(JSON.stringify(answer.body));
        return;
      }
      embeddings();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    received,
    answer(next: Behaviour) {
      behaviour = next;
    },
    /** Answers the held requests. */
    release() {
      for (const answer of held) answer();
      held = [];
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type EmbeddingsServer = Awaited<ReturnType<typeof embeddingsServer>>;

/** A server error for every request. */
export const failing: Behaviour = () => ({ status: 500, body: { error: { message: 'model overloaded' } } });
