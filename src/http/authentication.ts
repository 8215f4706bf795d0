// Authentication runs after the rate limit (onRequest) and before the body is read, on the routes
// of operations and on those marked `authenticated` (MCP); the others carry no hook. An operation's
// scope is checked here too (the pipeline's first step, src/operations/invoke.ts), so a key without
// it costs no parsing.
import type { FastifyInstance, FastifyRequest, preParsingHookHandler } from 'fastify';
import type { AuthContext } from '../operations/context.js';
import { checkScope } from '../operations/invoke.js';
import { type Authenticator, presentedKey } from './auth.js';
import { hookList, judgeThen } from './hooks.js';

export function registerAuthentication(app: FastifyInstance, authenticator: Pick<Authenticator, 'authenticate'>): void {
  app.decorateRequest('auth', null);
  app.addHook('onRoute', (route) => {
    const { operation, authenticated, bearerKey = false } = route.config ?? {};
    if (!operation && !authenticated) return;
    const admit = (request: FastifyRequest, auth: AuthContext) => {
      if (operation) checkScope(operation, auth);
      request.auth = auth;
    };
    // A callback hook, not an async one: a key seen in the last second is judged without a promise.
    const authenticate: preParsingHookHandler = (request, _reply, payload, done) => {
      let auth: AuthContext | Promise<AuthContext>;
      try {
        auth = authenticator.authenticate(presentedKey(request.headers, bearerKey), request.headers.host);
      } catch (error) {
        return done(error as Error);
      }
      judgeThen(
        auth,
        (resolved) => admit(request, resolved),
        (error) => (error ? done(error) : done(null, payload)),
      );
    };
    route.preParsing = [authenticate, ...hookList(route.preParsing)];
  });
}
