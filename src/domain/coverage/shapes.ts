// Schema pieces the coverage records share.
import { Type } from '@sinclair/typebox';

/** A string of the values listed, written as one `enum` in the OpenAPI document. */
export const StringEnum = <const T extends string>(values: readonly T[], description?: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });
