// How the `workspace` command fails: a usage error exits 2, any other failure exits 1 (as `gh`
// does). With `--json` the error goes to standard error as `{"error": {...}}` — the API's own
// error body when the API refused, with its HTTP `status` — so a script reads it the same way.
import { WorkspaceApiError } from '../../client/src/index.js';

/** The command line is wrong: an unknown command or flag, a missing argument, a bad value. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly code = 'invalid_usage',
    readonly param?: string,
  ) {
    super(message);
  }
}

/** The command was understood but its work failed (a failed sync, a server out of reach). */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly code = 'command_failed',
  ) {
    super(message);
  }
}

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** A parseArgs error (unknown flag, a flag without its value) as a usage error naming the flag. */
export function fromParseArgs(error: unknown): UsageError | undefined {
  if (!(error instanceof TypeError) || !('code' in error)) return undefined;
  const code = String(error.code);
  if (!code.startsWith('ERR_PARSE_ARGS')) return undefined;
  const flag = /'(-{1,2}[^' ]+)/.exec(error.message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    return new UsageError(`Unknown flag ${flag ?? ''}`.trim(), 'unknown_flag', flag);
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    return new UsageError(
      flag ? `${flag} needs a value.` : (error.message.split('\n')[0] ?? ''),
      'invalid_value',
      flag,
    );
  }
  return new UsageError(error.message.split('\n')[0] ?? error.message, 'invalid_usage');
}

/**
 * Writes the error on `err` and answers the exit code. `usageHint` is the line that points to the
 * command's help after a usage error.
 */
export function reportError(
  error: unknown,
  err: NodeJS.WritableStream,
  options: { json: boolean; usageHint: string },
): number {
  const usage = error instanceof UsageError ? error : fromParseArgs(error);
  if (options.json) {
    err.write(`${JSON.stringify({ error: errorBody(usage ?? error) })}\n`);
  } else if (usage) {
    err.write(`workspace: ${usage.message}\n${options.usageHint}\n`);
  } else if (error instanceof WorkspaceApiError) {
    err.write(
      `workspace: ${error.status} ${error.code}: ${error.body.message}${error.param ? ` (${error.param})` : ''}\n`,
    );
  } else if (error instanceof CommandError) {
    err.write(`workspace: ${error.message}\n`);
  } else {
    err.write(`workspace: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  return usage ? EXIT_USAGE : EXIT_FAILURE;
}

function errorBody(error: unknown): Record<string, unknown> {
  if (error instanceof WorkspaceApiError) return { ...error.body, status: error.status };
  if (error instanceof UsageError) {
    return {
      type: 'usage_error',
      code: error.code,
      message: error.message,
      ...(error.param ? { param: error.param } : {}),
    };
  }
  if (error instanceof CommandError) return { type: 'command_error', code: error.code, message: error.message };
  return {
    type: 'command_error',
    code: 'internal_error',
    message: error instanceof Error ? error.message : String(error),
  };
}
