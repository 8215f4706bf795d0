const MAX_ERROR_LENGTH = 2000;

/** An error as a job's `last_error` keeps it and the log shows it: its message, cut to length. */
export function describe(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH)}…` : text;
}
