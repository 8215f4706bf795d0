// The `workspace` command. `serve` and `migrate` work on the database directly; the rest talk to
// the control plane over HTTP, so they work while a server owns the (embedded) database.
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.js';
import { runCommand } from './run.js';

class CliError extends Error {}

/** A database that cannot be opened or does not answer stops the command with one line, no stack. */
async function sayingWhyTheDatabaseFailed<T>(action: string, run: () => Promise<T>): Promise<T> {
  const { DatabaseStartError } = await import('../db/index.js');
  try {
    return await run();
  } catch (error) {
    if (error instanceof DatabaseStartError) throw new CliError(`cannot ${action}: ${error.message}`);
    throw error;
  }
}

async function main(argv: string[]): Promise<number> {
  // Every command but the two that open the database runs through src/cli/run.ts (help too).
  if ((argv[0] !== 'serve' && argv[0] !== 'migrate') || argv.includes('--help') || argv.includes('-h')) {
    return runCommand(argv);
  }
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
    },
  });
  const [command] = positionals;

  if (command === 'serve') {
    const { serve } = await import('../serve.js');
    await sayingWhyTheDatabaseFailed('start', () => serve(loadConfig()));
    return -1; // keeps running
  }
  if (command === 'migrate') {
    const config = loadConfig();
    const { openDatabaseAtStart, migrateToLatest } = await import('../db/index.js');
    const database = await sayingWhyTheDatabaseFailed('migrate', () =>
      openDatabaseAtStart({
        url: config.databaseUrl,
        dataDir: config.dataDir,
        preparedStatements: config.databasePreparedStatements,
      }),
    );
    try {
      const applied = await migrateToLatest(database.db);
      process.stdout.write(
        values.json
          ? `${JSON.stringify({ applied })}\n`
          : applied.length > 0
            ? `Applied: ${applied.join(', ')}\n`
            : 'Already up to date.\n',
      );
    } finally {
      await database.close();
    }
    return 0;
  }
  return runCommand(argv);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof CliError || error instanceof ConfigError) {
      process.stderr.write(`workspace: ${error.message}\n`);
      process.exitCode = error instanceof ConfigError ? 78 : 1;
    } else if (error instanceof Error && /^E[A-Z]+$/.test(String((error as NodeJS.ErrnoException).code))) {
      // A system error at start (the port taken, DATA_DIR not writable or in use): its message says
      // what and where, in one line; the stack would say nothing more to an operator.
      process.stderr.write(`workspace: ${error.message}\n`);
      process.exitCode = 1;
    } else if (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`workspace: ${error.message}\nRun 'workspace ${process.argv[2]} --help' for usage.\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`workspace: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    }
    // A failed start may leave handles open (the database, timers): the process ends here.
    process.exit();
  },
);
