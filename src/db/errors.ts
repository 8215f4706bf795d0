// PostgreSQL errors recognised by SQLSTATE, on pg and PGlite alike (both expose `code`).

function sqlState(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string'
    ? error.code
    : undefined;
}

export const isUniqueViolation = (error: unknown): boolean => sqlState(error) === '23505';
export const isForeignKeyViolation = (error: unknown): boolean => sqlState(error) === '23503';
/** Input PostgreSQL could not take: bad text for a type, nesting too deep, program limits. */
export const isInputRejected = (error: unknown): boolean => {
  const state = sqlState(error);
  return state !== undefined && (state.startsWith('22') || state === '54001' || state === '54000');
};
export const isQueryCanceled = (error: unknown): boolean => sqlState(error) === '57014';
/**
 * A statement refused for what it holds or met, and rolled back: input PostgreSQL could not take
 * (`isInputRejected`), a constraint (class 23), a serialization failure or deadlock (40001,
 * 40P01). Not an outage or a cancellation, nor 40003, whose statement may have committed.
 */
export const isDataRefusal = (error: unknown): boolean => {
  const state = sqlState(error);
  return isInputRejected(error) || state?.startsWith('23') === true || state === '40001' || state === '40P01';
};

/** Socket errors that mean the server cannot be reached, or the connection to it was lost. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH']);
/** SQLSTATEs of a server that drops or refuses sessions: shutting down, starting, or full. */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300']);
/** node-postgres's own messages for a connection lost, never made, or not usable. */
const UNREACHABLE_MESSAGES = [
  'Connection terminated', // 'Connection terminated', '… unexpectedly', '… due to connection timeout'
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
];

/**
 * The database cannot be reached: the connection was refused, lost or timed out (node-postgres's
 * socket errors and messages, PostgreSQL's class 08), or the server is shutting down, starting or
 * out of connection slots. Nothing about the request is at fault; it may succeed when retried.
 */
export function isDatabaseUnreachable(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 3) return false;
  const state = sqlState(error);
  if (
    state !== undefined &&
    (UNREACHABLE_CODES.has(state) || state.startsWith('08') || UNAVAILABLE_STATES.has(state))
  ) {
    return true;
  }
  const message = error instanceof Error ? error.message : undefined;
  if (message !== undefined && UNREACHABLE_MESSAGES.some((text) => message.startsWith(text))) return true;
  // Node's connection attempts to each address of a name (localhost: ::1, then 127.0.0.1) fail together.
  if (error instanceof AggregateError) return error.errors.some((inner) => isDatabaseUnreachable(inner, depth + 1));
  return 'cause' in error && isDatabaseUnreachable(error.cause, depth + 1);
}
