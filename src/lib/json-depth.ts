// A bound on how deeply a JSON body may nest. Parsing has none, but much that follows walks a value
// recursively (JSON.stringify for the idempotency hash and for jsonb, Ajv, the MCP SDK's zod), and
// a few thousand levels exhaust the stack there: a 500 from a 10 KB body. No record of this API
// comes near the bound.
export const MAX_JSON_DEPTH = 64;

/** Whether `value` nests arrays and objects more than `max` levels deep; iterative, so any depth is safe. */
export function nestsDeeperThan(value: unknown, max = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (typeof current !== 'object' || current === null) continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(current) ? current : Object.values(current)) stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * The first field of a body object whose value makes the body nest more than `max` levels (the
 * body itself is one), to be named as the `param` of the refusal. A body that is not an object is
 * refused by validation before anything walks it.
 */
export function tooDeepField(body: unknown, max = MAX_JSON_DEPTH): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  return Object.keys(body).find((key) => nestsDeeperThan((body as Record<string, unknown>)[key], max - 1));
}
