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
