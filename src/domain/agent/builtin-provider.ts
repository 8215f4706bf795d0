// The built-in provider (DESIGN.md §8): offline and deterministic, the default when no language
// model is configured. Its rules, in order:
//   1. a registered client function or an enabled workflow whose name appears in the message
//      (case-insensitive, `_` matching a space) is called, its arguments taken from `key=value`
//      pairs in the message; once the results are in, it reports them;
//   2. a handoff agent whose name appears in the message takes the conversation;
//   3. otherwise the answer is the part of the best-ranked passage that answers the question (the
//      engine searched them and kept only passages at or above the rank threshold), citing its
//      document;
//   4. with no such passage it says it does not know, and the engine records a knowledge gap.
import { randomUUID } from 'node:crypto';
import { cutText } from '../../lib/text.js';
import { answerSentences } from './answer-sentences.js';
import {
  citationOf,
  type Passage,
  type Provider,
  type StepRequest,
  type StepResult,
  type ToolCall,
  type ToolSpec,
  type TurnItem,
} from './types.js';

export const UNKNOWN_ANSWER =
  "I don't know the answer to that yet. I've passed your question on to the team so it can be answered.";

/** Longest answer taken from a passage; longer passages are cut at a sentence end. */
const MAX_ANSWER_CHARS = 1500;

const PAIR = /([A-Za-z_][\w.-]*)=("([^"]*)"|'([^']*)'|([^\s,;]+))/g;

export const newCallId = () => `call_${randomUUID().replace(/-/g, '')}`;

const normalize = (text: string) => text.toLowerCase().replace(/_/g, ' ').replace(/\s+/g, ' ').trim();

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Where `name` first appears in `text` as whole words (case-insensitive, `_` = space), or -1. */
export function findName(text: string, name: string): number {
  const wanted = normalize(name);
  if (wanted === '') return -1;
  const pattern = new RegExp(`(?<![\\p{L}\\p{M}\\p{N}])${escapeRegExp(wanted)}(?![\\p{L}\\p{M}\\p{N}])`, 'u');
  return normalize(text).search(pattern);
}

/** The `key=value` pairs of a message; values may be quoted. */
export function parsePairs(text: string): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const match of text.matchAll(PAIR)) {
    const key = match[1] as string;
    const value = match[3] ?? match[4] ?? (match[5] as string).replace(/[.!?]+$/, '');
    pairs[key] = value;
  }
  return pairs;
}

/** Arguments for a tool: the pairs its schema declares (all pairs when it declares none), typed by the schema. */
export function argumentsFor(tool: ToolSpec, pairs: Record<string, string>): Record<string, unknown> {
  const properties = tool.parameters.properties as Record<string, { type?: unknown }> | undefined;
  const declared = properties && typeof properties === 'object' && Object.keys(properties).length > 0;
  const args: Record<string, unknown> = {};
  for (const [key, raw] of Object.entries(pairs)) {
    // Own properties only: `toString=…` in a message is no declared argument.
    if (declared && !Object.hasOwn(properties, key)) continue;
    const type = declared ? properties[key]?.type : undefined;
    if ((type === 'number' || type === 'integer') && raw.trim() !== '' && Number.isFinite(Number(raw))) {
      args[key] = Number(raw);
    } else if (type === 'boolean' && /^(true|false)$/i.test(raw)) {
      args[key] = raw.toLowerCase() === 'true';
    } else {
      args[key] = raw;
    }
  }
  return args;
}

/** The part of the passage that answers `question` (src/domain/agent/answer-sentences.ts), at most 1,500 characters. */
function answerFrom(passage: Passage, question: string): string {
  const text = answerSentences(question, passage.content.trim() || passage.snippet.trim());
  if (text.length <= MAX_ANSWER_CHARS) return text;
  const cut = cutText(text, MAX_ANSWER_CHARS);
  const end = Math.max(cut.lastIndexOf('. '), cut.lastIndexOf('.\n'));
  return end > MAX_ANSWER_CHARS / 2 ? cut.slice(0, end + 1) : `${cut.trimEnd()}…`;
}

/** Streams text in word-sized pieces, as a model would. */
function stream(text: string, onDelta: (text: string) => void): void {
  for (const piece of text.match(/\S+\s*|\s+/g) ?? []) onDelta(piece);
}

/** The results that arrived since the last step that made calls. */
function latestResults(items: TurnItem[]): Extract<TurnItem, { type: 'result' }>[] {
  const results: Extract<TurnItem, { type: 'result' }>[] = [];
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i] as TurnItem;
    if (item.type !== 'result') break;
    results.unshift(item);
  }
  return results;
}

/** The built-in provider runs no model: its steps count no tokens (a trace says the usage was not reported). */
const NO_MODEL_USAGE = { input_tokens: 0, output_tokens: 0, reported: false };

export function createBuiltinProvider(): Provider {
  return {
    name: 'builtin',
    model: 'builtin',
    async step(request: StepRequest): Promise<StepResult> {
      return { ...decide(request), usage: NO_MODEL_USAGE };
    },
  };
}

/** The built-in rules, in order (this module's header). */
function decide(request: StepRequest): StepResult {
  const results = latestResults(request.items);
  if (results.length > 0) {
    const text = results.map((r) => `${r.name} returned ${JSON.stringify(r.output ?? null)}.`).join('\n');
    stream(text, request.onDelta);
    return { text, calls: [], citations: [] };
  }
  const input = request.items.find((item) => item.type === 'input');
  const message = input?.type === 'input' ? input.content : '';
  const pairs = parsePairs(message);
  const words = message.replace(PAIR, ' ');

  // Rule 1: client functions and enabled workflows named in the message, in order of appearance.
  const named = request.tools
    .filter((tool) => tool.type !== 'internal')
    .map((tool) => ({ tool, at: findName(words, tool.name) }))
    .filter((found) => found.at >= 0)
    .sort((a, b) => a.at - b.at);
  if (named.length > 0) {
    const calls: ToolCall[] = named.map(({ tool }) => ({
      call_id: newCallId(),
      name: tool.name,
      arguments: argumentsFor(tool, pairs),
    }));
    return { text: '', calls, citations: [] };
  }

  // Rule 2: a handoff agent named in the message takes the conversation.
  const handoff = request.handoffAgents
    .map((agent) => ({ agent, at: findName(words, agent.name) }))
    .filter((found) => found.at >= 0)
    .sort((a, b) => a.at - b.at)[0];
  if (handoff) {
    const text = `I'm handing you over to ${handoff.agent.name}.`;
    stream(text, request.onDelta);
    return { text, calls: [], citations: [], handoffTo: handoff.agent };
  }

  // Rule 3: the best passage at or above the threshold.
  const best = request.passages[0];
  if (best) {
    const text = answerFrom(best, message);
    stream(text, request.onDelta);
    return { text, calls: [], citations: [citationOf(best)] };
  }

  // Rule 4: nothing good enough.
  stream(UNKNOWN_ANSWER, request.onDelta);
  return { text: UNKNOWN_ANSWER, calls: [], citations: [], knowledgeGap: true };
}
