// Schemas that clients hand us (a workflow's input, a client function's parameters): checked where
// they are sent, so a schema Ajv cannot use is a 422 then rather than a 500 or a failed call
// later, and compiled again when a turn validates arguments against them.
//
// Every such schema goes through one compiler. `addUsedSchema: false` keeps a schema's `$id` out of
// the Ajv instance: a client's `$id` can then neither collide with another client's (of any
// tenant) nor replace one of Ajv's own meta-schemas. Ajv keeps what it compiles, and so does the
// cache here: an instance compiles at most 200 schemas, or 4 MB of them, and is then replaced, so
// a long-running process does not grow without end.
//
// Patterns (`pattern`, `patternProperties`) run on a linear-time engine (src/lib/linear-regexp.ts):
// a client's pattern is matched against text that anyone writing to the agent chooses. No format is
// loaded (`format` is not checked), so `format: "regex"` compiles nothing either.
import { Ajv, type ValidateFunction } from 'ajv';
import { createLinearRegExpEngine } from './linear-regexp.js';

/** Instructions the patterns of one schema may compile to: about a tenth of a second of re2js. */
const MAX_PATTERN_INSTRUCTIONS = 20_000;

function createSchemaCompiler(max: { schemas: number; bytes: number }) {
  const engine = createLinearRegExpEngine(MAX_PATTERN_INSTRUCTIONS);
  const options = { strict: false, allErrors: false, addUsedSchema: false, code: { regExp: engine.regExp } } as const;
  let ajv = new Ajv(options);
  let cache = new Map<string, ValidateFunction>();
  let compiled = 0;
  let bytes = 0;
  return {
    /** Ajv's own validity check of a schema against its meta-schema (draft-07). */
    validateSchema(schema: Record<string, unknown>): string | undefined {
      return ajv.validateSchema(schema) ? undefined : ajv.errorsText();
    },
    /** Validation errors as one line of text. */
    errorsText(errors: ValidateFunction['errors']): string {
      return ajv.errorsText(errors);
    },
    /** The compiled schema; throws what Ajv throws for a schema it cannot compile. */
    compile(schema: Record<string, unknown>): ValidateFunction {
      const key = JSON.stringify(schema);
      let validate = cache.get(key);
      if (!validate) {
        if (compiled >= max.schemas || bytes + key.length > max.bytes) {
          ajv = new Ajv(options);
          cache = new Map();
          compiled = 0;
          bytes = 0;
        }
        // Counted before compiling: Ajv keeps a schema it refuses all the same.
        compiled++;
        bytes += key.length;
        engine.startBudget();
        validate = ajv.compile(schema);
        // An `$async` schema compiles to a validator that answers a promise: `!validate(data)`
        // would then pass anything, and its rejection would go unhandled.
        if ((validate as { $async?: boolean }).$async)
          throw new Error('an asynchronous schema ($async) cannot be used here');
        cache.set(key, validate);
      }
      return validate;
    },
  };
}

const compiler = createSchemaCompiler({ schemas: 200, bytes: 4_000_000 });

/** A client's schema compiled, for validating data against it; throws when Ajv cannot use it. */
export const compileClientSchema = (schema: Record<string, unknown>): ValidateFunction => compiler.compile(schema);

/** Why data failed a compiled client schema, as one line of text. */
export const schemaErrorsText = (errors: ValidateFunction['errors']): string => compiler.errorsText(errors);

/**
 * Why Ajv (JSON Schema draft-07, its default dialect) could not use `schema`, or undefined when it
 * can. Ajv throws, rather than answers false, for a `$schema` it has not loaded (2020-12 among them)
 * and for a `$ref` it cannot resolve; both are the sender's mistake. Compiling also proves what
 * `validateSchema` does not.
 */
export function jsonSchemaProblem(schema: Record<string, unknown>): string | undefined {
  try {
    const invalid = compiler.validateSchema(schema);
    if (invalid !== undefined) return invalid;
    compiler.compile(schema);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/**
 * Why `schema`, sent as the field `name`, cannot describe a function's arguments (always a JSON
 * object), as a message naming the field; undefined when it can.
 */
export function argumentsSchemaProblem(schema: Record<string, unknown>, name: string): string | undefined {
  const problem = jsonSchemaProblem(schema);
  if (problem !== undefined) return `${name} is not a JSON Schema (draft-07) this API can use: ${problem}`;
  if (schema.type !== undefined && schema.type !== 'object') return `${name} must describe an object.`;
  return undefined;
}
