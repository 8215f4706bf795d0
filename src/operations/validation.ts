// The one validation setup every way of calling an operation uses (REST routes, MCP tools, the
// control plane): Ajv with the formats and the `x-lower-case` keyword, schemas compiled on first use
// (src/http/lazy-compile.ts). Values are taken as sent: `"true"` is not a boolean. Only what arrives
// as text (a path, a query string) is coerced to the schema's types.
import { Ajv, type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import { LOWER_CASE } from '../domain/shapes.js';

/** JSON (a body, a tool's arguments), or text to coerce (a path, a query string). */
export type InputKind = 'json' | 'text';

/** A validation function in Ajv's shape: the answer, and the errors of the last call on itself. */
export type Validate<E = unknown> = ((data: unknown) => boolean) & { errors?: E };

/** A validator that compiles on its first call; its errors are those of the compiled one. */
export function lazyValidator<E>(compile: () => Validate<E>): Validate<E> {
  let compiled: Validate<E> | undefined;
  const validate: Validate<E> = (data) => {
    compiled ??= compile();
    const valid = compiled(data);
    validate.errors = compiled.errors;
    return valid;
  };
  return validate;
}

export type Validator = Validate<ErrorObject[] | null | undefined>;

/**
 * UUIDs are case-insensitive (RFC 9562), and PostgreSQL compares them so, but a string sent in upper
 * case and used as it came (a tag, a job's dedupe key, an id echoed back) would not match the same
 * id in lower case. So validation lower-cases every value marked `x-lower-case`, wherever it sits
 * (path, query, body, MCP arguments), before any handler sees it.
 */
function addLowerCaseKeyword(ajv: Ajv): void {
  ajv.addKeyword({
    keyword: LOWER_CASE,
    schemaType: 'boolean',
    modifying: true,
    validate: (
      enabled: boolean,
      data: unknown,
      _schema: unknown,
      place?: { parentData: unknown; parentDataProperty: string | number },
    ) => {
      if (enabled && typeof data === 'string' && place?.parentData) {
        (place.parentData as Record<string | number, unknown>)[place.parentDataProperty] = data.toLowerCase();
      }
      return true;
    },
  });
}

function createAjv(kind: InputKind): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    removeAdditional: false,
    useDefaults: true,
    strict: false,
    coerceTypes: kind === 'text' ? 'array' : false,
  });
  addFormats.default(ajv);
  addLowerCaseKeyword(ajv);
  return ajv;
}

const ajvs: Record<InputKind, Ajv> = { json: createAjv('json'), text: createAjv('text') };

/** A validator of `schema` for input of `kind`, compiled on its first call. */
export function validatorOf(schema: object, kind: InputKind): Validator {
  return lazyValidator(() => ajvs[kind].compile(schema) as Validator);
}
