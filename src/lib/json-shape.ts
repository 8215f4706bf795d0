// The shape limits of a JSON body, judged on its bytes before it is parsed. Parsing, validating,
// hashing and storing a body each cost time in proportion to the number of values it holds, and
// all of it runs on the event loop: 5 MB of `[1,1,1,…]` is two and a half million values, seconds
// of work for one request while every other tenant waits. One pass over the bytes (strings are
// skipped with a native search for their closing quote) counts values and nesting and stops at the
// first limit crossed, so a refusal costs a few milliseconds at most.
//
// What is counted: each `[` and `{`, and each `,` outside strings, so a container's members and
// the container itself. The count is a budget, not an exact number of JSON values. Malformed JSON
// is left to the parser, which names it.

export interface JsonShapeLimits {
  /** Containers inside containers: `[[1]]` is two deep. */
  maxDepth: number;
  /** Values, counted as above. */
  maxValues: number;
}

export interface JsonShapeProblem {
  limit: 'depth' | 'values';
  /** The top-level field the limit was crossed in ('' when the body is not an object). */
  param: string;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
/** A key longer than this is not worth naming in an error. */
const MAX_PARAM_BYTES = 200;

/** The index of the quote that closes the string opened at `open`, or -1. */
function closingQuote(bytes: Buffer, open: number): number {
  let at = bytes.indexOf(QUOTE, open + 1);
  while (at > 0) {
    let backslashes = 0;
    while (bytes[at - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
    at = bytes.indexOf(QUOTE, at + 1);
  }
  return -1;
}

/** The text of the JSON string between `start` and `end` (its quotes excluded), or ''. */
function keyText(bytes: Buffer, start: number, end: number): string {
  if (start < 0 || end - start > MAX_PARAM_BYTES) return '';
  try {
    return String(JSON.parse(bytes.toString('utf8', start - 1, end + 1)));
  } catch {
    return '';
  }
}

/** The first shape limit `bytes` (a JSON text) crosses, or undefined. */
export function jsonShapeProblem(bytes: Buffer, limits: JsonShapeLimits): JsonShapeProblem | undefined {
  let depth = 0;
  let values = 0;
  let topIsObject = false;
  // The last string seen directly inside a top-level object: the key of the member being read.
  let keyStart = -1;
  let keyEnd = -1;
  const problem = (limit: JsonShapeProblem['limit']): JsonShapeProblem => ({
    limit,
    param: topIsObject ? keyText(bytes, keyStart, keyEnd) : '',
  });
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (byte === QUOTE) {
      const end = closingQuote(bytes, i);
      if (end < 0) return undefined;
      if (depth === 1 && topIsObject) {
        keyStart = i + 1;
        keyEnd = end;
      }
      i = end;
    } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      if (depth === 0) topIsObject = byte === OPEN_OBJECT;
      depth++;
      values++;
      if (depth > limits.maxDepth) return problem('depth');
      if (values > limits.maxValues) return problem('values');
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
      depth--;
    } else if (byte === COMMA) {
      values++;
      if (values > limits.maxValues) return problem('values');
    }
  }
  return undefined;
}
