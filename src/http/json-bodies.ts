// JSON only: Fastify's own text/plain parser would let a plain-text body through to operations.
// The bytes' shape is judged against the route's limits before parsing (src/http/body-limits.ts),
// then JSON.parse, then one walk (src/lib/json-body.ts) for what may not be stored or copied, a
// `__proto__` key included (what Fastify's secure-json-parse refuses, without naming it).
import type { FastifyInstance } from 'fastify';
import { BadRequestError, ValidationError } from '../domain/errors.js';
import { jsonProblem, jsonText } from '../lib/json-body.js';
import { routeBodyLimits, shapeRefusal } from './body-limits.js';

export function registerJsonBodies(app: FastifyInstance, bodyLimitBytes: number): void {
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const overShape = shapeRefusal(body as Buffer, routeBodyLimits(request, bodyLimitBytes));
    if (overShape) return done(overShape);
    const decoded = jsonText(body as Buffer, request.headers['content-type']);
    if ('problem' in decoded) return done(new BadRequestError(decoded.problem));
    // An empty body reads as no body, so bodiless POSTs work whatever the client sends.
    if (decoded.text.trim() === '') return done(null, undefined);
    let value: unknown;
    try {
      value = JSON.parse(decoded.text);
    } catch {
      return done(new BadRequestError('The request body is not valid JSON.'));
    }
    const problem = jsonProblem(value);
    if (problem === undefined) return done(null, value);
    done(
      problem.forbiddenKey || problem.param === ''
        ? new BadRequestError(problem.message, problem.param || undefined)
        : new ValidationError(problem.param, problem.message),
    );
  });
}
