// Schemas shared by every area: ids, lists, the deleted acknowledgement, the error body.
import { type TSchema, Type } from '@sinclair/typebox';

/** A schema keyword: validation lower-cases the string it marks (src/operations/validation.ts). */
export const LOWER_CASE = 'x-lower-case';

/**
 * A name in a path that is not a UUID (a slug, a permission's name): no control characters. A NUL
 * could not reach the database's text at all; refused here, the path names nothing: 404.
 */
export const PathName = (options: { maxLength: number; description: string }) =>
  Type.String({ minLength: 1, pattern: '^[^\\u0000-\\u001f\\u007f]+$', ...options });

// A plain UUID: ajv's `uuid` format alone also takes a `urn:uuid:` prefix, which PostgreSQL does not.
export const Uuid = Type.String({
  format: 'uuid',
  pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
  description: 'A UUID, in either case; answered in lower case.',
  [LOWER_CASE]: true,
});

/** A string of the values listed, written as one `enum` in the OpenAPI document. */
export const StringEnum = <const T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });

/** An object of any properties (its type a record of unknowns). */
export const JsonObject = (options: { description?: string } = {}) =>
  Type.Unsafe<Record<string, unknown>>(Type.Object({}, { additionalProperties: true, ...options }));

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds.' });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const ListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size, 1 to 100.' }),
    // The longest cursor issued is a file's path (at most 200 characters of up to four UTF-8
    // bytes): 1,067 characters of base64url.
    cursor: Type.Optional(Type.String({ maxLength: 2048, description: 'The `next_cursor` of the previous page.' })),
  },
  { additionalProperties: false },
);

export const ListOf = <T extends TSchema>(item: T) =>
  Type.Object({
    object: Type.Literal('list'),
    data: Type.Array(item),
    has_more: Type.Boolean(),
    next_cursor: Nullable(Type.String()),
  });

export const Deleted = Type.Object({
  id: Type.String(),
  object: Type.Literal('deleted'),
  deleted: Type.Boolean(),
});

export const ErrorSchema = Type.Object(
  {
    error: Type.Object({
      type: Type.String({ description: 'Error category.' }),
      code: Type.String({ description: 'Machine-readable code; see /docs/errors.' }),
      message: Type.String({ description: 'Human-readable text.' }),
      param: Type.Optional(Type.String({ description: 'The parameter at fault, as a path (`files[3].path`).' })),
      doc_url: Type.String({ description: 'Link to the code in the error reference.' }),
      event_id: Type.Optional(Type.String({ description: 'On 500: identifies the server log entry.' })),
    }),
  },
  { $id: 'Error', title: 'Error' },
);
