// Content negotiation that more than one part of the server must agree on, and Server-Sent Events
// answers, which more than one route makes.
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EventSink } from '../operations/registry.js';

/**
 * Whether a request's Accept header asks for Server-Sent Events: `text/event-stream` with a
 * quality above 0 and at least that of JSON (`application/json`, `application/*` or `*\/*`, when
 * listed). Both at the same quality (`application/json, text/event-stream`) is a stream; a
 * stream only as a fallback (`application/json, text/event-stream;q=0.1`), or refused (`q=0`), is
 * not. Media types ignore case.
 */
export function asksForEventStream(accept: string | string[] | undefined): boolean {
  const header = Array.isArray(accept) ? accept.join(',') : (accept ?? '');
  if (!/event-stream/i.test(header)) return false;
  let stream = 0;
  let json = 0;
  for (const range of header.split(',')) {
    const [type = '', ...params] = range.split(';').map((part) => part.trim().toLowerCase());
    const q = params.find((param) => /^q\s*=/.test(param));
    const quality = q === undefined ? 1 : Number(q.slice(q.indexOf('=') + 1).trim());
    if (!(quality >= 0 && quality <= 1)) continue; // not a quality: the range is ignored
    if (type === 'text/event-stream') stream = Math.max(stream, quality);
    else if (type === 'application/json' || type === 'application/*' || type === '*/*') json = Math.max(json, quality);
  }
  return stream > 0 && stream >= json;
}

/**
 * Takes the answer over from Fastify as a stream of Server-Sent Events, its status and headers
 * sent now: those set so far (the request id, the rate limit's) and the stream's own.
 */
export function openEventStream(reply: FastifyReply): ServerResponse {
  reply.hijack();
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) headers[name] = value;
  reply.raw.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    'x-request-id': String(reply.request.id),
  });
  return reply.raw;
}

/** An operation's event stream over HTTP: Server-Sent Events frames on the reply, opened on demand. */
export function eventSink(request: FastifyRequest, reply: FastifyReply): EventSink {
  let raw: ServerResponse | undefined;
  const early: string[] = [];
  const write = (frame: string) => {
    if (!raw) early.push(frame);
    else if (!raw.destroyed && !raw.writableEnded) raw.write(frame);
  };
  return {
    open() {
      // The headers set so far go with the stream's: the request id, the rate limit's.
      raw = openEventStream(reply);
      for (const frame of early.splice(0)) write(frame);
    },
    event: (type, data) => write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`),
    comment: (text) => write(`: ${text}\n\n`),
    end: () => raw?.end(),
    logError: (message, detail) => request.log.error(detail, message),
  };
}
