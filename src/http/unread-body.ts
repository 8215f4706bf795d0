// A body left unread by its answer (a 401, a 404, a 413 sent before the body arrived). Closing the
// connection at once would reset it while the client is still sending, and a client that sends
// its whole body before reading (Node's fetch) would see ECONNRESET or EPIPE instead of the answer.
// So, as nginx's lingering close does, the rest is read and thrown away, and the connection kept
// for the next request; but only so much of it: past LINGER_BYTES, or LINGER_MS after the answer,
// the connection is closed, so that a stranger cannot make us read an endless body.
import { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** How much of a body is still read and thrown away after its answer. */
export const LINGER_BYTES = 16 * 1024 * 1024;
/** How long after its answer the rest of a body may take to arrive. */
export const LINGER_MS = 5_000;
/** How often a lingering body is looked at. */
const WATCH_MS = 50;

export function registerUnreadBody(app: FastifyInstance): void {
  // Fastify closes the connection after a body it refused while reading (a 413 before the body
  // arrived): the client, still sending, would be reset. The rest is drained instead, as below.
  app.addHook('onError', (request, reply, error, done) => {
    if ((error as { statusCode?: number }).statusCode === 413 && !request.raw.complete)
      reply.removeHeader('connection');
    done();
  });
  app.addHook('onResponse', (request, _reply, done) => {
    const raw = request.raw;
    const socket = raw.socket;
    // Requests made in-process (`inject`) have no socket of their own.
    if (raw.complete || raw.destroyed || !(socket instanceof Socket) || socket.destroyed) return done();
    // Watched on the socket's count of bytes read: the HTTP parser reads the socket itself, and a
    // request whose answer is sent no longer emits its body.
    const start = socket.bytesRead;
    const since = performance.now();
    const watch = setInterval(() => {
      if (raw.complete || socket.destroyed) return clearInterval(watch);
      if (socket.bytesRead - start > LINGER_BYTES || performance.now() - since > LINGER_MS) {
        clearInterval(watch);
        socket.destroy();
      }
    }, WATCH_MS);
    watch.unref();
    done();
  });
}
