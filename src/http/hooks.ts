// Hooks added to routes as they are declared (onRoute), so only the routes that need one run it.

/** A route's hooks of one kind as a list (a route may give none, one, or several). */
export function hookList<T>(hook: T | T[] | undefined): T[] {
  if (hook === undefined) return [];
  return Array.isArray(hook) ? hook : [hook];
}

/**
 * For callback hooks: runs `judge` on a value that is at hand or still coming, then calls `next`
 * with what `judge` threw, or with nothing. A value at hand is judged without a promise. `next` is
 * called outside the try, so what runs after it is never answered twice; a value that never comes
 * goes to `failed` (by default `next` with its error).
 */
export function judgeThen<T>(
  value: T | Promise<T>,
  judge: (value: T) => void,
  next: (error?: Error) => void,
  failed: (error: Error) => void = next,
): void {
  const settle = (resolved: T) => {
    try {
      judge(resolved);
    } catch (error) {
      return next(error as Error);
    }
    next();
  };
  if (value instanceof Promise) value.then(settle, failed);
  else settle(value);
}
