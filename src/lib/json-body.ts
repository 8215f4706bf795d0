// What a parsed JSON body may not hold, checked once as it is parsed:
// - nesting past MAX_JSON_DEPTH levels. Parsing has no bound, but much that follows walks a value
//   recursively (JSON.stringify for the idempotency hash and for jsonb, Ajv, the MCP SDK's zod),
//   and a few thousand levels exhaust the stack there: a 500 from a 10 KB body. No record of this
//   API comes near the bound.
// - text that is not well-formed Unicode: a lone surrogate (`"\ud800"` is valid JSON). UTF-8, and
//   so PostgreSQL, cannot carry one: it would be stored as U+FFFD, silently, and two strings that
//   differ only there would become one (a 500 on a unique key, a commit's paths).
// - a NUL character (`"\u0000"` is valid JSON): PostgreSQL's text and jsonb cannot hold one, and
//   the insert would fail without saying which field.
// - a number beyond what a double holds (`1e400`): JSON.parse reads it as Infinity, which would be
//   stored as null.
// - a `__proto__` key, or a `constructor` key holding a `prototype`: what the REST body parser
//   refuses (secure-json-parse). JSON.parse keeps such a key, but any copy made by assignment (the
//   MCP SDK's argument parsing) turns it into the copy's prototype, silently.
// The walk is iterative, so any depth is safe.
export const MAX_JSON_DEPTH = 64;

/** A high surrogate not followed by a low one, or a low one not after a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// String.prototype.isWellFormed, which Node 20 has but TypeScript's ES2022 library does not declare.
const wellFormed = (text: string) => !LONE_SURROGATE.test(text);

/** Why text cannot be stored as it is, or undefined. */
const textProblem = (text: string): string | undefined => {
  if (text.includes('\u0000')) return 'holds a NUL character (\\u0000), which cannot be stored';
  return wellFormed(text) ? undefined : 'is not valid Unicode text (it holds a lone surrogate)';
};

export interface JsonProblem {
  /** Where: a body field's path (`files[1].path`); for nesting, the top-level field. */
  param: string;
  message: string;
  /** A `__proto__` or `constructor.prototype` key: a malformed body rather than a bad value. */
  forbiddenKey?: true;
}

interface Entry {
  value: unknown;
  depth: number;
  parent: Entry | undefined;
  key: string | number | undefined;
}

const pathOf = (entry: Entry): string => {
  const keys: (string | number)[] = [];
  for (let at: Entry | undefined = entry; at?.key !== undefined; at = at.parent) keys.unshift(at.key);
  return keys.reduce<string>(
    (path, key) => (typeof key === 'number' ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`),
    '',
  );
};

/**
 * The first problem of a parsed JSON value (see above), or undefined. With `nestingOnly`, only
 * its structure is checked, depth and prototype keys (text and numbers are left to whoever reads
 * them).
 */
export function jsonProblem(value: unknown, max = MAX_JSON_DEPTH, nestingOnly = false): JsonProblem | undefined {
  const stack: Entry[] = [{ value, depth: 0, parent: undefined, key: undefined }];
  while (stack.length > 0) {
    const entry = stack.pop() as Entry;
    const { value: current, depth } = entry;
    if (typeof current === 'string') {
      const problem = nestingOnly ? undefined : textProblem(current);
      if (problem !== undefined) {
        const param = pathOf(entry);
        return { param, message: `${param || 'The body'} ${problem}.` };
      }
      continue;
    }
    if (typeof current === 'number' && !Number.isFinite(current) && !nestingOnly) {
      const param = pathOf(entry);
      return { param, message: `${param || 'The body'} is a number too large to be read (beyond ±1.8e308).` };
    }
    if (typeof current !== 'object' || current === null) continue;
    if (depth + 1 > max) {
      // The top-level field it is under: the full path would be as long as the nesting.
      let top = entry;
      while (top.parent?.key !== undefined) top = top.parent;
      const param = String(top.key ?? '');
      return { param, message: `${param || 'The body'} nests more than ${max} levels deep.` };
    }
    if (Array.isArray(current)) {
      current.forEach((item, i) => {
        stack.push({ value: item, depth: depth + 1, parent: entry, key: i });
      });
    } else {
      for (const [key, item] of Object.entries(current)) {
        if (
          key === '__proto__' ||
          (key === 'constructor' && typeof item === 'object' && item !== null && 'prototype' in item)
        ) {
          const param = pathOf({ value: item, depth: depth + 1, parent: entry, key });
          return {
            param,
            message: `${param} is a key that is not accepted (__proto__, constructor.prototype).`,
            forbiddenKey: true,
          };
        }
        const problem = nestingOnly ? undefined : textProblem(key);
        if (problem !== undefined) {
          const param = pathOf(entry);
          return { param, message: `${param || 'The body'} has a key that ${problem}.` };
        }
        stack.push({ value: item, depth: depth + 1, parent: entry, key });
      }
    }
  }
  return undefined;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * The text of a JSON body (RFC 8259 §8.1: UTF-8, a byte order mark ignored), or why it has none:
 * a `charset` other than UTF-8 in its Content-Type, or bytes that are not UTF-8. Decoded loosely,
 * each bad byte would become U+FFFD and be stored so, silently.
 */
export function jsonText(body: Buffer, contentType: string | undefined): { text: string } | { problem: string } {
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType ?? '')?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
    return { problem: `The request body must be UTF-8 JSON, not charset '${charset}'.` };
  }
  try {
    return { text: UTF8.decode(body) };
  } catch {
    return { problem: 'The request body is not valid UTF-8.' };
  }
}
