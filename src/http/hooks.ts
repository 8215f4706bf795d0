// Hooks added to routes as they are declared (onRoute), so only the routes that need one run it.

/** A route's hooks of one kind as a list (a route may give none, one, or several). */
export function hookList<T>(hook: T | T[] | undefined): T[] {
  if (hook === undefined) return [];
  return Array.isArray(hook) ? hook : [hook];
}
