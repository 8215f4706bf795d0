// JSON Schema (as TypeBox and the OpenAPI document write it) → fast-check arbitraries: values that
// satisfy a schema, for fuzzing operations from their own definitions.
import fc from 'fast-check';

// biome-ignore lint/suspicious/noExplicitAny: JSON Schema fragments are read loosely.
export type JsonSchema = any;

const UNICODE_SAMPLES = ['żółć', '日本語テキスト', 'emoji 🎉🚀', 'RTL مرحبا', 'zero\u200bwidth', 'combining é'];

function stringArbitrary(schema: JsonSchema): fc.Arbitrary<string> {
  const min = schema.minLength ?? 0;
  const max = Math.min(schema.maxLength ?? 60, 120);
  switch (schema.format) {
    case 'uuid':
      return fc.uuid({ version: 7 });
    case 'date-time':
      return fc
        .date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2030-01-01T00:00:00Z'), noInvalidDate: true })
        .map((d) => d.toISOString());
    case 'date':
      return fc
        .date({ min: new Date('2024-01-01T00:00:00Z'), max: new Date('2026-01-01T00:00:00Z'), noInvalidDate: true })
        .map((d) => d.toISOString().slice(0, 10));
    case 'email':
      return fc.emailAddress();
    case 'uri':
      return fc.webUrl();
  }
  if (schema.pattern) {
    return fc
      .stringMatching(new RegExp(schema.pattern))
      .filter((s) => s.length >= min && s.length <= (schema.maxLength ?? 1e9));
  }
  // Each sample repeated up to the minimum length; chosen from those that fit, not filtered after
  // the draw: a filter no draw can pass (a 12-character minimum) would never return.
  const unicode = UNICODE_SAMPLES.map((sample) => sample.repeat(Math.max(1, Math.ceil(min / sample.length)))).filter(
    (sample) => sample.length <= (schema.maxLength ?? 1e9),
  );
  const plain = fc.string({ minLength: min, maxLength: Math.max(min, max) });
  return unicode.length > 0 ? fc.oneof(plain, fc.constantFrom(...unicode)) : plain;
}

export function arbitraryFor(schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || typeof schema !== 'object') return fc.constant(null);
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.anyOf || schema.oneOf)
    return fc.oneof(...(schema.anyOf ?? schema.oneOf).map((s: JsonSchema) => arbitraryFor(s, depth)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return stringArbitrary(schema);
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000 });
    case 'number':
      return fc.double({
        min: schema.minimum ?? -1000,
        max: schema.maximum ?? 1000,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const min = schema.minItems ?? 0;
      const max = Math.max(min, Math.min(schema.maxItems ?? 3, 3));
      return fc.array(arbitraryFor(schema.items ?? {}, depth + 1), { minLength: min, maxLength: max });
    }
    case 'object': {
      const properties: Record<string, JsonSchema> = schema.properties ?? {};
      const required = new Set<string>(schema.required ?? []);
      const record: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, prop] of Object.entries(properties)) record[name] = arbitraryFor(prop, depth + 1);
      if (Object.keys(record).length === 0) {
        return depth > 2
          ? fc.constant({})
          : fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 });
      }
      return fc.record(record, { requiredKeys: [...required].filter((k) => k in record) });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** A value that breaks the schema's type: what a careless client sends. */
export function wrongTypeFor(schema: JsonSchema): unknown {
  const type = Array.isArray(schema?.type) ? schema.type[0] : schema?.type;
  if (schema?.anyOf) return { unexpected: true };
  switch (type) {
    case 'string':
      return 12345;
    case 'integer':
    case 'number':
      return 'not a number';
    case 'boolean':
      return 'true';
    case 'array':
      return { not: 'an array' };
    case 'object':
      return 'not an object';
    default:
      return undefined;
  }
}
