// What a custom data source accepts: its declared fields, and rows checked against them (external
// ids, data nesting and field types, text PostgreSQL can hold, tags) with their defaults filled.
import type { DataFieldDeclaration } from '../../db/index.js';
import { startsWithCalendarDate } from '../../lib/time.js';
import { MissingParameterError, ValidationError } from '../errors.js';
import {
  type FieldType,
  MAX_DATA_DEPTH,
  MAX_EXTERNAL_ID_LENGTH,
  MAX_ROW_TAGS,
  type RowInput,
} from './data-source-records.js';

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused.
export const CONTROL = /[\u0000-\u001f\u007f]/;

const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

function checkExternalId(param: string, externalId: string): void {
  if (externalId.length === 0 || externalId.length > MAX_EXTERNAL_ID_LENGTH) {
    throw new ValidationError(param, `${param} must be 1 to ${MAX_EXTERNAL_ID_LENGTH} characters.`);
  }
  if (CONTROL.test(externalId)) throw new ValidationError(param, `${param} must not contain control characters.`);
}

/** PostgreSQL text and jsonb cannot hold U+0000; say which field has it rather than fail later. */
export function checkText(param: string, value: string | undefined): void {
  if (value?.includes('\u0000')) throw new ValidationError(param, `${param} must not contain the NUL character.`);
}

function matchesType(type: FieldType, value: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'date':
      return (
        typeof value === 'string' &&
        DATE.test(value) &&
        startsWithCalendarDate(value) &&
        !Number.isNaN(Date.parse(value))
      );
    case 'json':
      return true;
  }
}

const TYPE_WORDS: Record<FieldType, string> = {
  string: 'a string',
  number: 'a finite number',
  boolean: 'a boolean',
  date: 'an ISO 8601 date or date-time string',
  json: 'any JSON value',
};

/**
 * Row data: nested at most MAX_DATA_DEPTH levels, no NUL characters, and conforming to the
 * source's declared fields (undeclared keys are allowed; null counts as absent). Walks with an
 * explicit stack so hostile nesting cannot exhaust the call stack.
 */
function checkData(param: string, data: Record<string, unknown>, fields: DataFieldDeclaration[]): void {
  const stack: [unknown, number][] = [[data, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop() as [unknown, number];
    if (typeof value === 'string') {
      checkText(param, value);
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth > MAX_DATA_DEPTH) {
      throw new ValidationError(param, `${param} is nested more than ${MAX_DATA_DEPTH} levels deep.`);
    }
    if (Array.isArray(value)) {
      for (const item of value) stack.push([item, depth + 1]);
    } else {
      for (const [key, item] of Object.entries(value)) {
        checkText(param, key);
        stack.push([item, depth + 1]);
      }
    }
  }
  for (const field of fields) {
    const at = `${param}.${field.name}`;
    // Own keys only: a field named `constructor` or `toString` is absent, not Object's method.
    const value = Object.hasOwn(data, field.name) ? data[field.name] : undefined;
    if (value === undefined || value === null) {
      if (field.required) throw new MissingParameterError(at, `Missing required field: ${at} (declared required).`);
      continue;
    }
    if (!matchesType(field.type, value)) {
      throw new ValidationError(at, `${at} must be ${TYPE_WORDS[field.type]} (declared type ${field.type}).`);
    }
  }
}

/**
 * Field names no row could carry: request bodies may not hold a `__proto__` key (src/lib/json-body.ts).
 * `constructor` and `prototype` stay allowed: a row carries them as plain keys.
 */
const UNCARRIABLE_FIELD_NAMES: ReadonlySet<string> = new Set(['__proto__']);

export function checkFields(fields: DataFieldDeclaration[]): void {
  const seen = new Map<string, number>();
  fields.forEach((field, i) => {
    if (UNCARRIABLE_FIELD_NAMES.has(field.name)) {
      throw new ValidationError(
        `fields[${i}].name`,
        `fields[${i}].name cannot be ${field.name}: no row could carry that key (request bodies may not hold it).`,
      );
    }
    const earlier = seen.get(field.name);
    if (earlier !== undefined) {
      throw new ValidationError(`fields[${i}].name`, `fields[${i}].name repeats fields[${earlier}].name.`);
    }
    seen.set(field.name, i);
  });
}

export interface NormalizedRow {
  external_id: string;
  data: Record<string, unknown>;
  tags: string[];
  searchable_text: string;
  content: string;
}

/** Checks one row and fills its defaults; `prefix` is the row's parameter path (`rows[3]`, or ''). */
export function normalizeRow(
  prefix: string,
  externalId: string,
  input: RowInput,
  fields: DataFieldDeclaration[],
  extraTag?: string,
): NormalizedRow {
  const at = (name: string) => (prefix === '' ? name : `${prefix}.${name}`);
  checkExternalId(at('external_id'), externalId);
  checkData(at('data'), input.data, fields);
  checkText(at('searchable_text'), input.searchable_text);
  checkText(at('content'), input.content);
  (input.tags ?? []).forEach((tag, i) => {
    checkText(`${at('tags')}[${i}]`, tag);
  });
  const tags = [...new Set([...(input.tags ?? []), ...(extraTag ? [extraTag] : [])])];
  if (tags.length > MAX_ROW_TAGS) {
    throw new ValidationError(
      at('tags'),
      `${at('tags')} must hold at most ${MAX_ROW_TAGS} distinct tags, the smart source's own (${extraTag}) among them.`,
    );
  }
  return {
    external_id: externalId,
    data: input.data,
    tags,
    searchable_text: input.searchable_text ?? '',
    content: input.content ?? '',
  };
}
