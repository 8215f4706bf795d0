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
