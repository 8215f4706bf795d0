// Schemas compiled on first use rather than all at start. Fastify compiles every route's request
// validators (Ajv) and response serializers (fast-json-stringify) while it starts, and the MCP tools
// their input validators: about half the CPU of a start, for routes a given process may seldom or
// never serve. Here each is compiled when first called, then called as compiled: one check and one
// call more per use. A schema that does not compile fails its route's first use, not the start;
// the test suites use every operation. Validators are built so by src/operations/validation.ts;
// this holds Fastify's response serializers.
import { createRequire } from 'node:module';
import type { FastifyServerOptions } from 'fastify';

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
