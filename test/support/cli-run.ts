// The `workspace` command run in this process (src/cli/run.ts), with its standard streams captured:
// the same code as `node bin/workspace.js`, without a process start per call.
import { PassThrough, Writable } from 'node:stream';
import { runCommand } from '../../src/cli/run.js';
import type { CliResult } from './process.js';

export interface InProcessOptions {
  env?: Record<string, string>;
  /** Lines typed on standard input (then it ends), or a stream to write to while it runs. */
  stdin?: string | PassThrough;
  /** Standard input and error are a terminal. */
  interactive?: boolean;
}

class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: () => void) {
    this.text += chunk.toString();
    done();
  }
}

export async function runInProcess(args: string[], options: InProcessOptions = {}): Promise<CliResult> {
  const out = new Capture();
  const err = new Capture();
  const stdin = options.stdin instanceof PassThrough ? options.stdin : new PassThrough();
  if (!(options.stdin instanceof PassThrough)) stdin.end(options.stdin ?? '');
  const code = await runCommand(args, {
    out,
    err,
    env: { PATH: process.env.PATH ?? '', ...options.env },
    stdin,
    interactive: options.interactive ?? false,
  });
  return { code, stdout: out.text, stderr: err.text };
}
