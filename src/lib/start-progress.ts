// What `serve` says on stderr while it starts, so that a first start (the database created and
// migrated) is never silent: each lengthy stage as it begins, then how long it took; then that the
// server is starting (building the app, listening), and where it listens and how long the whole
// start took. A start with nothing to create or migrate says only those last two lines.

/** Runs `run` as a stage of the start named `label` (shown as it begins, with its duration). */
export type StartStage = <T>(label: string, run: () => Promise<T>) => Promise<T>;

export interface StartProgress {
  stage: StartStage;
  /** A stage whose end is the `ready` line (or an error), so shown without a duration. */
  begin(label: string): void;
  ready(origin: string): void;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** `write` receives the text (stderr's write); with `quiet` (LOG_LEVEL=silent) nothing is said. */
export function startProgress(write: (text: string) => void, quiet = false): StartProgress {
  const say = quiet ? () => {} : write;
  return {
    async stage<T>(label: string, run: () => Promise<T>): Promise<T> {
      say(`${label}… `);
      const started = performance.now();
      try {
        const result = await run();
        say(`${seconds(performance.now() - started)}\n`);
        return result;
      } catch (error) {
        say('failed\n');
        throw error;
      }
    },
    begin(label: string) {
      say(`${label}…\n`);
    },
    ready(origin: string) {
      // From the process's start (performance's time origin): loading the code included.
      say(`Ready on ${origin} in ${seconds(performance.now())}\n`);
    },
  };
}
