// Schemas that clients hand us to validate against later (a workflow's input, a client function's
// parameters): checked once, where they are sent, so a schema Ajv cannot use is a 422 then rather
// than a 500 or a failed call later.
import { Ajv } from 'ajv';

const checker = new Ajv({ strict: false });

/**
 * Why Ajv (JSON Schema draft-07, its default dialect) could not use `schema`, or undefined when it
 * can. Ajv throws, rather than answers false, for a `$schema` it has not loaded (2020-12 among them)
 * and for a `$ref` it cannot resolve; both are the sender's mistake. Compiling also proves what
 * `validateSchema` does not; the compiled schema is dropped again, so nothing accumulates.
 */
export function jsonSchemaProblem(schema: Record<string, unknown>): string | undefined {
  try {
    if (!checker.validateSchema(schema)) return checker.errorsText();
  } catch (error) {
    return messageOf(error);
  }
  // Valid against the meta-schema, so an `$id` is a string, which `removeSchema` needs.
  try {
    checker.compile(schema);
    return undefined;
  } catch (error) {
    return messageOf(error);
  } finally {
    checker.removeSchema(schema);
  }
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));
