// Cutting text to a bound counted as the API counts lengths: in characters (code points), never
// between the two halves of a surrogate pair, whose lone half PostgreSQL would store as U+FFFD.

/** How many characters (code points) `text` holds. */
export function characterCount(text: string): number {
  return text.length - (text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g)?.length ?? 0);
}

/** `text` cut to at most `max` characters (code points). */
export function cutText(text: string, max: number): string {
  // At most `max` UTF-16 units is at most `max` code points.
  if (text.length <= max) return text;
  let units = 0;
  for (let points = 0; points < max && units < text.length; points++) {
    units += (text.codePointAt(units) ?? 0) > 0xffff ? 2 : 1;
  }
  return text.slice(0, units);
}
