// Personal data in text imported from real conversations (docs/simulations.md, "Import"):
// e-mail addresses, payment card numbers and phone numbers are replaced with placeholders.
// Written here rather than taken from a library: the usual PII scrubbers are large,
// locale-heavy or Python-only, and these three patterns with a Luhn check are all a test case
// needs. The rules are deliberately conservative about digits so order numbers survive:
// - e-mail: `local@domain.tld`                                        → `[email]`
// - card: 13 to 19 digits, optionally grouped by spaces or dashes, passing the Luhn check
//                                                                     → `[card_number]`
// - phone: `+` then 7 to 15 digits (spaces, dots, dashes, parentheses allowed between them);
//   or 9 to 15 digits written in at least three groups separated by those characters;
//   or a plain run of 10 or 11 digits starting with 0 (national format) → `[phone]`
// Cards are replaced before phones, so a Luhn-valid grouped number is a card.

export const EMAIL_PLACEHOLDER = '[email]';
export const CARD_PLACEHOLDER = '[card_number]';
export const PHONE_PLACEHOLDER = '[phone]';

// An e-mail address is found from its `@` and domain, then its local part by walking back: the
// whole pattern (`[A-Za-z0-9._%+-]+@…`) tried at every position scans each long run of letters or
// digits once per character of it, quadratic in the run (a quarter of a second for 20,000 letters).
const EMAIL_AT_DOMAIN = /@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
const EMAIL_LOCAL = /[A-Za-z0-9._%+-]/;
// No number starts or ends inside a longer token joined by `-` or `.`: the digit groups of an id
// such as a UUID (`01a20fac-8187-7514-9017-aad64f7c477d`) are no phone or card number.
const CARD = /(?<![\w+])(?<!\w[.-])\d(?:[ -]?\d){12,18}(?!\w)(?![.-]\w)/g;
const PHONE_INTERNATIONAL = /(?<![\w+])(?<!\w[.-])\+\d[\d\s().-]{5,22}\d(?!\w)(?![.-]\w)/g;
const PHONE_GROUPED = /(?<![\w+])(?<!\w[.-])\(?\d{1,5}\)?(?:[\s.-]\(?\d{1,5}\)?){2,6}(?!\w)(?![.-]\w)/g;
const PHONE_NATIONAL = /(?<![\w+])(?<!\w[.-])0\d{9,10}(?!\w)(?![.-]\w)/g;

const digitsOf = (text: string) => text.replace(/\D/g, '');

/** The Luhn checksum of a digit string (ISO/IEC 7812). */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return digits.length > 0 && sum % 10 === 0;
}

/**
 * A run of 13–19 digits (grouped or not) the card pattern matched: a card if it passes Luhn as a
 * whole; else the card may be a span of its groups, with other digits beside it ("card 4111 1111
 * 1111 1111 123"): the longest span of whole groups that is 13–19 digits and passes Luhn is
 * replaced, and what is left on either side is looked at again. A run with no such span is kept
 * as it is (an order number), and a run is never cut inside a group.
 */
function redactCardRun(run: string): string {
  if (luhnValid(digitsOf(run))) return CARD_PLACEHOLDER;
  const parts = run.split(/([ -])/); // groups at even indices, the separators between them at odd ones
  let best: { from: number; to: number; digits: number } | undefined;
  for (let from = 0; from < parts.length; from += 2) {
    let digits = 0;
    for (let to = from; to < parts.length; to += 2) {
      digits += (parts[to] as string).length;
      if (digits > 19) break;
      const span = parts.slice(from, to + 1).join('');
      if (digits >= 13 && digits > (best?.digits ?? 0) && luhnValid(digitsOf(span))) best = { from, to, digits };
    }
  }
  if (!best) return run;
  const before = parts.slice(0, best.from).join('');
  const after = parts.slice(best.to + 1).join('');
  return `${before.replace(CARD, redactCardRun)}${CARD_PLACEHOLDER}${after.replace(CARD, redactCardRun)}`;
}

/**
 * Replaces each `local@domain.tld` with the e-mail placeholder: what the pattern
 * `[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}` matches, left to right, in
 * time linear in the text. A match's local part is the run of local-part characters just before
 * its `@`, no further back than the end of the address before it.
 */
function redactEmails(text: string): string {
  let redacted = '';
  let from = 0;
  for (const match of text.matchAll(EMAIL_AT_DOMAIN)) {
    const at = match.index;
    let start = at;
    while (start > from && EMAIL_LOCAL.test(text.charAt(start - 1))) start--;
    if (start === at) continue; // no local part
    redacted += text.slice(from, start) + EMAIL_PLACEHOLDER;
    from = at + match[0].length;
  }
  return redacted + text.slice(from);
}

/** Replaces e-mail addresses, card numbers and phone numbers in `text` with placeholders. */
export function redactText(text: string): string {
  return redactEmails(text)
    .replace(CARD, redactCardRun)
    .replace(PHONE_INTERNATIONAL, (match) => {
      const n = digitsOf(match).length;
      return n >= 7 && n <= 15 ? PHONE_PLACEHOLDER : match;
    })
    .replace(PHONE_GROUPED, (match) => {
      const n = digitsOf(match).length;
      return n >= 9 && n <= 15 ? PHONE_PLACEHOLDER : match;
    })
    .replace(PHONE_NATIONAL, PHONE_PLACEHOLDER);
}

/** Redacts every string inside a JSON value (object keys are kept). */
export function redactValue<T>(value: T): T {
  if (typeof value === 'string') return redactText(value) as T;
  if (Array.isArray(value)) return value.map((item) => redactValue(item)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactValue(v)])) as T;
  }
  return value;
}
