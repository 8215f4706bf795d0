// Schemas compiled on first use rather than all at start. Fastify compiles every route's request
// validators (Ajv) and response serializers (fast-json-stringify) while it starts, and the MCP tools
// their input validators: about half the CPU of a start, for routes a given process may seldom or
// never serve. Here each is compiled when first called, then called as compiled: one check and one
// call more per use. A schema that does not compile fails its route's first use, not the start;
// the test suites use every operation.
import { createRequire } from 'node:module';
import type { FastifyServerOptions } from 'fastify';

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

type Serialize = (data: unknown) => string;
type SerializerFactory = (externalSchemas: unknown, options: unknown) => (route: unknown) => Serialize;

// Fastify's own serializer factory, from where Fastify itself loads it.
const fromFastify = createRequire(createRequire(import.meta.url).resolve('fastify'));
const defaultSerializers = fromFastify('@fastify/fast-json-stringify-compiler') as () => SerializerFactory;

/** Fastify's `schemaController` option: its own response serializers, each built on first use. */
export const lazySerializers: NonNullable<FastifyServerOptions['schemaController']> = {
  compilersFactory: {
    buildSerializer(externalSchemas: unknown, options: unknown) {
      const compile = defaultSerializers()(externalSchemas, options);
      return (route: unknown): Serialize => {
        let serialize: Serialize | undefined;
        return (data) => {
          serialize ??= compile(route);
          return serialize(data);
        };
      };
    },
  },
};
