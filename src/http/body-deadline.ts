// Bodies that must arrive in time. A request whose body is still arriving `timeoutMs` after its
// headers (sent a byte at a time, say) is refused as Node refuses a request that does not arrive in
// time (400, the connection closed): such connections would otherwise pile up. Fastify turns Node's
// own limit off, and on Node 20 that limit does not reach a body whose headers have arrived.
//
// One sweep watches every such request, rather than a timer and two listeners (`end`, `close`) on
// each request's stream. Under load those listeners kept each POST's objects alive through the
// young generation's collections, which then moved them to the old generation for a full
// collection to free: with them, the comment write's main thread moved five to seven times the
// bytes to the old generation and ran six times the full collections (bench/README.md).
// A request is watched from its headers until its answer is sent, then forgotten at once; the
// sweep (every quarter of `timeoutMs`, at most a second, so a refusal comes up to that much after
// the deadline) refuses the ones past their time and forgets those whose connection went away.

import type { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply } from 'fastify';

export interface BodyDeadlineOptions {
  timeoutMs: number;
  /** Answers a request whose body did not arrive in time on its socket (with its id), and closes it. */
  refuse(error: Error & { code: string }, socket: Socket, requestId: string): void;
}

/**
 * Whether a request's body can no longer be late: it arrived, or the request or its connection is
 * gone (a request answered before its body, whose client then left, is neither complete nor
 * destroyed: Node no longer follows it).
 */
const over = (raw: IncomingMessage) => raw.complete || raw.destroyed || raw.socket.destroyed;

/** A request being watched, in a list by arrival (the oldest first). */
interface Watch {
  reply: FastifyReply;
  since: number;
  prev: Watch | undefined;
  next: Watch | undefined;
}

// The request's own field for its watch, declared with the request (decorateRequest) so every
// request has the same shape.
const WATCH = 'bodyDeadlineWatch';
type Watched = { [WATCH]: Watch | undefined };

/** Registers the deadline on `app`'s requests; returns how many requests are watched, for tests. */
export function registerBodyDeadline(app: FastifyInstance, options: BodyDeadlineOptions): { readonly size: number } {
  // A list linked through the watches themselves rather than a Map or a Set: a table that grows
  // and is replaced leaves the old one, moved to the old generation, pointing at the requests it held
  // until a full collection, so they too would be kept and moved there.
  let first: Watch | undefined;
  let last: Watch | undefined;
  let size = 0;
  const forget = (watch: Watch) => {
    if (watch.prev === undefined) first = watch.next;
    else watch.prev.next = watch.next;
    if (watch.next === undefined) last = watch.prev;
    else watch.next.prev = watch.prev;
    watch.prev = undefined;
    watch.next = undefined;
    (watch.reply.request as unknown as Watched)[WATCH] = undefined;
    size--;
  };

  const expire = (raw: IncomingMessage, reply: FastifyReply) => {
    const socket = raw.socket;
    // Answered already (a 401 before the body was read): the connection is only closed.
    if (reply.raw.headersSent) socket.destroy();
    else {
      const timeout = Object.assign(new Error('request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
      options.refuse(timeout, socket, String(reply.request.id));
    }
  };

  const sweep = setInterval(
    () => {
      const now = performance.now();
      for (let watch = first; watch !== undefined; ) {
        const { next, reply, since } = watch;
        const raw = reply.request.raw;
        if (over(raw)) forget(watch);
        else if (now - since >= options.timeoutMs) {
          forget(watch);
          expire(raw, reply);
        }
        watch = next;
      }
    },
    Math.min(1000, options.timeoutMs / 4),
  );
  sweep.unref();
  app.addHook('onClose', (_instance, done) => {
    clearInterval(sweep);
    while (first !== undefined) forget(first);
    done();
  });

  app.decorateRequest(WATCH, undefined);
  app.addHook('onRequest', (request, reply, done) => {
    const raw = request.raw;
    // Only a request with a body still to come (not yet `complete` when its headers are read, even
    // a GET); requests made in-process (`inject`) have no socket of their own to time out.
    const body = raw.headers['content-length'] !== undefined || raw.headers['transfer-encoding'] !== undefined;
    if (body && !raw.complete && raw.socket instanceof Socket) {
      const watch: Watch = { reply, since: performance.now(), prev: last, next: undefined };
      if (last === undefined) first = watch;
      else last.next = watch;
      last = watch;
      size++;
      (request as unknown as Watched)[WATCH] = watch;
    }
    done();
  });
  // Forgotten once answered, unless its body is still arriving (the sweep closes that connection).
  app.addHook('onResponse', (request, _reply, done) => {
    const watch = (request as unknown as Watched)[WATCH];
    if (watch !== undefined && over(request.raw)) forget(watch);
    done();
  });

  return {
    get size() {
      return size;
    },
  };
}
