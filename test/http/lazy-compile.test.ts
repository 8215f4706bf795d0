// Route schemas are compiled on first use, not at start (src/http/lazy-compile.ts): nothing is
// compiled until a validator or serializer is first called, and then it answers as the compiled one.
import { Ajv } from 'ajv';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { lazySerializers } from '../../src/http/lazy-compile.js';
import { lazyValidator } from '../../src/operations/validation.js';

describe('schemas compiled on first use', () => {
  it('a validator compiles on its first call, once, and carries the errors of each call', () => {
    const ajv = new Ajv();
    let compiled = 0;
    const validate = lazyValidator(() => {
      compiled += 1;
      return ajv.compile({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] });
    });
    expect(compiled).toBe(0);
    expect(validate({ n: 'one' })).toBe(false);
    expect(validate.errors).toMatchObject([{ instancePath: '/n', keyword: 'type' }]);
    expect(validate({ n: 1 })).toBe(true);
    expect(validate.errors).toBeNull();
    expect(compiled).toBe(1);
  });

  it("a route's response serializer is Fastify's own, built at its first answer rather than at start", async () => {
    const app = Fastify({ schemaController: lazySerializers });
    const object = { type: 'object', properties: { id: { type: 'string' }, n: { type: 'integer' } } };
    app.get('/ok', { schema: { response: { 200: object } } }, async () => ({ id: 'a', n: 2, secret: 'left out' }));
    // A schema fast-json-stringify refuses: the start goes on; its route fails when first used.
    const unresolvable = { type: 'object', properties: { x: { $ref: 'nowhere#/x' } } };
    app.get('/broken', { schema: { response: { 200: unresolvable } } }, async () => ({ x: 1 }));
    await app.ready();
    try {
      const ok = await app.inject('/ok');
      expect(ok.statusCode).toBe(200);
      expect(ok.body).toBe('{"id":"a","n":2}'); // properties outside the schema left out, as compiled
      const broken = await app.inject('/broken');
      expect(broken.statusCode).toBe(500);
    } finally {
      await app.close();
    }
    // Without it, the same schema stops the start.
    const eager = Fastify();
    eager.get('/broken', { schema: { response: { 200: unresolvable } } }, async () => ({ x: 1 }));
    await expect(eager.ready()).rejects.toThrow();
  });
});
