// Requests answered from their headers alone, before anything reads their body: a path with no
// route (its body, however large, is never parsed), and a request with two Host headers (which
// names two tenants' hosts at once; Node would keep the first).
import type { FastifyInstance } from 'fastify';
import { BadRequestError } from '../domain/errors.js';
import { noRouteAnswerer } from './errors.js';

/** How many times `name` (lower case) appears among raw headers. */
function headerCount(rawHeaders: string[], name: string): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const header = rawHeaders[i] as string;
    // Compared only when the length matches: no string made for each header of each request.
    if (header.length === name.length && header.toLowerCase() === name) count++;
  }
  return count;
}

/** Registers the answers; after the rate limit, so that these requests count against it too. */
export function registerHeaderAnswers(app: FastifyInstance, publicUrl: string | undefined): void {
  const noRoute = noRouteAnswerer(publicUrl);
  app.addHook('onRequest', (request, reply, done) => {
    if (headerCount(request.raw.rawHeaders, 'host') > 1) {
      return done(new BadRequestError('The request has more than one Host header.', 'Host'));
    }
    if (request.is404) return noRoute(request, reply);
    done();
  });
}
