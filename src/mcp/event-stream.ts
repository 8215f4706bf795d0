// GET /api/v1/mcp: a Server-Sent Events stream with heartbeats and, as the spec says, no
// server-initiated messages yet. A stream holds a socket and a timer for as long as its client keeps
// it, so a tenant's are counted; and its key is judged again every STREAM_JUDGE_MS, so the stream of
// a key revoked, locked or expired ends within a second.
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.js';
import { type Authenticator, KEY_CACHE_TTL_MS, presentedKey } from '../http/auth.js';
import { openEventStream } from '../http/negotiation.js';
import type { AuthContext } from '../operations/context.js';
import { DomainError } from '../operations/errors.js';

/** `Retry-After` of a stream refused at the tenant's limit: streams end when their clients go. */
const STREAM_RETRY_AFTER_S = 5;
/**
 * How often the keys of open event streams are judged again. A key's cached judgement is at most
 * KEY_CACHE_TTL_MS old, so the stream of a key revoked, locked or expired is judged afresh by
 * KEY_CACHE_TTL_MS and one tick after it, leaving the rest of the second for the lookup: it ends
 * within a second on every instance, as a request with the key is refused.
 */
const STREAM_JUDGE_MS = (1000 - KEY_CACHE_TTL_MS) / 2;

/** The open event streams of one key (and Host), judged again together. */
interface StreamsOfKey {
  apiKey: string;
  host: string | undefined;
  streams: Set<ServerResponse>;
  judging: boolean;
}

/**
 * Open event streams by the key and Host they were opened with. Every STREAM_JUDGE_MS each key is
 * judged again, once for all its streams, while any stream is open; a stream of a key no longer
 * valid ends. A database that does not answer ends none, and a key has one judgement under way at
 * most (a slow database is asked once, not per tick). The judgement is no use of the key:
 * `last_used_at` is not moved by an open stream.
 */
function keyWatch(authenticator: Pick<Authenticator, 'authenticate'>) {
  const streamsByKey = new Map<string, StreamsOfKey>();
  let judgeTimer: NodeJS.Timeout | undefined;
  async function judgeKey(group: StreamsOfKey): Promise<void> {
    if (group.judging) return;
    group.judging = true;
    try {
      await authenticator.authenticate(group.apiKey, group.host, { touch: false });
    } catch (error) {
      if (!(error instanceof DomainError)) return;
      for (const raw of group.streams) {
        if (!raw.writableEnded && !raw.destroyed) raw.end(': closed: the API key is no longer valid\n\n');
      }
    } finally {
      group.judging = false;
    }
  }
  function watch(raw: ServerResponse, apiKey: string, host: string | undefined): () => void {
    const id = `${host ?? ''}\n${apiKey}`;
    let group = streamsByKey.get(id);
    if (!group) {
      group = { apiKey, host, streams: new Set(), judging: false };
      streamsByKey.set(id, group);
    }
    group.streams.add(raw);
    judgeTimer ??= setInterval(() => {
      for (const each of streamsByKey.values()) void judgeKey(each);
    }, STREAM_JUDGE_MS).unref();
    const watched = group;
    return () => {
      watched.streams.delete(raw);
      if (watched.streams.size === 0) streamsByKey.delete(id);
      if (streamsByKey.size === 0 && judgeTimer) {
        clearInterval(judgeTimer);
        judgeTimer = undefined;
      }
    };
  }
  const stop = () => {
    clearInterval(judgeTimer);
    judgeTimer = undefined;
  };
  return { watch, stop };
}

/** The GET route's handler; `checkOrigin` refuses a browser origin that may not use the endpoint. */
export function eventStreamHandler(
  app: FastifyInstance,
  {
    config,
    authenticator,
    checkOrigin,
  }: {
    config: Pick<Config, 'mcpMaxStreamsPerTenant' | 'sseHeartbeatMs'>;
    authenticator: Pick<Authenticator, 'authenticate'>;
    checkOrigin: (request: FastifyRequest) => void;
  },
) {
  const keys = keyWatch(authenticator);
  const streams = new Set<ServerResponse>();
  /** Open event streams per tenant, on this process. */
  const streamsOf = new Map<string, number>();
  // Closing: open streams end, and a stream asked for now (its key judged while the server began
  // to close) is refused, or it would hold the close up with no judge left to end it.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    for (const stream of streams) stream.end();
    streams.clear();
    keys.stop();
  });

  return async (request: FastifyRequest, reply: FastifyReply) => {
    const { tenantId } = request.auth as AuthContext;
    checkOrigin(request);
    const open = streamsOf.get(tenantId) ?? 0;
    if (open >= config.mcpMaxStreamsPerTenant) {
      reply.header('retry-after', STREAM_RETRY_AFTER_S);
      throw new DomainError(
        'concurrency_limit_exceeded',
        `This workspace has ${open} MCP event streams open on this server, its limit (MCP_MAX_STREAMS_PER_TENANT); close one first.`,
      );
    }
    if (closing) {
      throw new DomainError('service_unavailable', 'This server is shutting down: open the stream again.');
    }
    const raw = openEventStream(reply);
    // The client left before this ran (while it was authenticated): its 'close' has been
    // emitted already and would never free the place, nor stop the heartbeat.
    if (raw.destroyed || request.raw.destroyed || raw.socket === null || raw.socket.destroyed) {
      raw.destroy();
      return;
    }
    streamsOf.set(tenantId, open + 1);
    raw.write(': connected\n\n');
    // A string: the request was authenticated with it.
    const unwatch = keys.watch(raw, presentedKey(request.headers, true) as string, request.headers.host);
    const timer = setInterval(() => {
      if (raw.writableEnded || raw.destroyed) return;
      raw.write(`: heartbeat ${new Date().toISOString()}\n\n`);
    }, config.sseHeartbeatMs);
    streams.add(raw);
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      clearInterval(timer);
      unwatch();
      streams.delete(raw);
      const left = (streamsOf.get(tenantId) ?? 1) - 1;
      if (left === 0) streamsOf.delete(tenantId);
      else streamsOf.set(tenantId, left);
    };
    raw.on('close', end);
    request.raw.on('close', end);
  };
}
