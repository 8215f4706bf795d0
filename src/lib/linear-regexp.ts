// Regular expressions that clients write (a JSON Schema's `pattern` and `patternProperties`) run on
// RE2 (re2js, its pure-JavaScript port) rather than on V8's backtracking engine: RE2 answers in time
// linear in the text, so `^(a+)+$` against `aaa…a!` cannot hold the event loop.
//
// A pattern is read first as JavaScript reads it (ECMA-262 with the `u` flag, which is what a JSON
// Schema pattern is), so what JavaScript refuses is refused as before. Backreferences are refused
// here rather than by RE2, because re2js's translation of JavaScript syntax would read `\8`, `\9`
// and `\k<name>` as plain text; RE2 refuses lookaround itself. An escaped surrogate half is refused
// too: JavaScript joins `\uD83D\uDE00` into one character, RE2 would look for two that no valid
// text holds.
//
// Compiling costs as well: RE2 expands a bounded repeat (`x{1000}` is a thousand copies of `x`) and
// re2js spends microseconds on each instruction of the program, so a few kilobytes of pattern could
// hold the loop for seconds. The engine therefore estimates each program's size from the pattern
// before compiling it, and the caller gives each schema a budget of instructions.
import { RE2JS } from 're2js';
import { cutText } from './text.js';

/** What Ajv's `code.regExp` option takes (Ajv does not export the type). */
export interface RegExpEngine {
  (pattern: string, flags: string): { test(text: string): boolean };
  /** How Ajv's standalone code would name the engine; this service does not generate any. */
  code: string;
}

/** Longest part of a pattern an error message quotes. */
const QUOTED_PATTERN_CHARS = 100;

/** A pattern this service does not run, with why, in words for the client. */
export class UnsupportedPatternError extends Error {
  constructor(pattern: string, why: string) {
    const cut = cutText(pattern, QUOTED_PATTERN_CHARS);
    const quoted = cut.length < pattern.length ? `${cut}…` : cut;
    super(
      `the pattern ${JSON.stringify(quoted)} is not supported: patterns run on a linear-time engine ` +
        `(RE2 syntax: no backreferences or lookaround), and ${why}`,
    );
  }
}

/** Just past the first `char` from `at` on (the end of the pattern if none). */
function past(pattern: string, char: string, at: number): number {
  const found = pattern.indexOf(char, at);
  return found < 0 ? pattern.length : found + 1;
}

/** Where the escape starting at `at` (a backslash) ends; throws for the escapes RE2 cannot run as written. */
function escapeEnd(pattern: string, at: number): number {
  const kind = pattern[at + 1];
  if (kind === 'k' || (kind !== undefined && kind >= '1' && kind <= '9')) {
    throw new UnsupportedPatternError(pattern, `${pattern.slice(at, at + 2)} is a backreference.`);
  }
  if ((kind === 'u' || kind === 'p' || kind === 'P') && pattern[at + 2] === '{') {
    return past(pattern, '}', at);
  }
  if (kind === 'u' && /^[dD][89a-fA-F]$/.test(pattern.slice(at + 2, at + 4))) {
    throw new UnsupportedPatternError(
      pattern,
      `${pattern.slice(at, at + 6)} is half of a character: write a character above U+FFFF as \\u{…}.`,
    );
  }
  return at + 2;
}

/** Where the character class starting at `at` (a `[`) ends. */
function classEnd(pattern: string, at: number): number {
  let i = at + 1;
  if (pattern[i] === '^') i++;
  while (i < pattern.length && pattern[i] !== ']') i = pattern[i] === '\\' ? escapeEnd(pattern, i) : i + 1;
  return i + 1;
}

/** Where the opening of the group at `at` (a `(`) ends: past `?:`, `?<name>` or a lookaround's `?=`. */
function groupOpeningEnd(pattern: string, at: number): number {
  if (pattern[at + 1] !== '?') return at + 1;
  if (pattern[at + 2] === '<' && pattern[at + 3] !== '=' && pattern[at + 3] !== '!') {
    return past(pattern, '>', at);
  }
  return at + (pattern[at + 2] === '<' ? 4 : 3);
}

const QUANTIFIER = /\{(\d+)(,(\d*))?\}/y;

/**
 * How many instructions RE2 compiles `pattern` (valid ECMA-262 with the `u` flag) into, at most:
 * RE2's own count (an atom one, a group two more than its content, a repeat `{n,m}` m times what it
 * repeats plus m − n), read from the pattern in one pass. Throws for escapes RE2 cannot run as written.
 */
function programSize(pattern: string): number {
  const groups = [{ total: 0, last: 0 }];
  let group = groups[0] as { total: number; last: number };
  const atom = (size: number) => {
    group.total += size;
    group.last = size;
  };
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i];
    if (c === '\\') {
      i = escapeEnd(pattern, i);
      atom(1);
    } else if (c === '[') {
      i = classEnd(pattern, i);
      atom(1);
    } else if (c === '(') {
      group = { total: 0, last: 0 };
      groups.push(group);
      i = groupOpeningEnd(pattern, i);
    } else if (c === ')') {
      const inner = (groups.pop() as { total: number }).total;
      group = groups[groups.length - 1] as { total: number; last: number };
      atom(inner + 2);
      i++;
    } else if (c === '{') {
      QUANTIFIER.lastIndex = i;
      const [whole = '', min = '0', comma, max] = QUANTIFIER.exec(pattern) ?? [];
      const low = Number(min);
      const high = comma === undefined ? low : max === '' ? low + 1 : Number(max);
      const repeated = group.last * high + (high - low);
      group.total += repeated - group.last;
      group.last = repeated;
      i += Math.max(whole.length, 1);
    } else {
      // `*`, `+` and `?` add at most two instructions to what they repeat, as a plain atom adds one.
      if (c === '*' || c === '+' || c === '?') group.total += 2;
      else atom(1);
      i++;
    }
  }
  return group.total;
}

/** The pattern compiled by RE2; throws UnsupportedPatternError (or JavaScript's SyntaxError) when it cannot be. */
function compileLinear(pattern: string, flags: string, size: number, budget: number) {
  if (size > budget) {
    throw new UnsupportedPatternError(
      pattern,
      `it expands to about ${size} instructions, more than the ${budget} this schema has left ` +
        '(a bounded repeat {n,m} counts m times what it repeats).',
    );
  }
  let re: RE2JS;
  try {
    re = RE2JS.compile(RE2JS.translateRegExp(pattern));
  } catch (error) {
    throw new UnsupportedPatternError(
      pattern,
      `RE2 refuses it (${error instanceof Error ? error.message : String(error)}).`,
    );
  }
  // Ajv shares a compiled pattern between schemas by this key: it must name the pattern.
  const key = `/${pattern}/${flags}`;
  return { test: (text: string) => re.test(text), toString: () => key };
}

/**
 * A RegExp engine for Ajv (`code: { regExp }`) that runs patterns on RE2. The patterns compiled after
 * `startBudget()` share `maxInstructions`; until the first call there is no bound.
 */
export function createLinearRegExpEngine(maxInstructions: number) {
  let left = Number.POSITIVE_INFINITY;
  const regExp: RegExpEngine = Object.assign(
    (pattern: string, flags: string) => {
      // JavaScript's parser says whether the pattern is one at all; it compiles nothing until run.
      new RegExp(pattern, flags);
      const size = programSize(pattern);
      const compiled = compileLinear(pattern, flags, size, left);
      left -= size;
      return compiled;
    },
    { code: 're2js' },
  );
  return {
    regExp,
    startBudget(): void {
      left = maxInstructions;
    },
  };
}
