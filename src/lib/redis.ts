// The Redis client (REDIS_URL) behind the shared rate-limit counters and MCP slots, made to fail
// fast. ioredis's defaults queue a command sent while Redis is unreachable until reconnects give
// up on it: every request waited 5–10 s for its count, and an MCP call failed after 16 s. Here the
// command fails at once instead, so a request passes uncounted (docs/api.md: Rate limits) and an MCP
// call takes a slot of this instance (docs/mcp.md), at normal speed. ioredis keeps reconnecting
// in the background, and shared counting resumes when Redis answers again.
// A connection Redis stops answering on while it stays open (a paused or overloaded server, a link
// that drops packets) is no outage to ioredis: its commands waited for ever, and so did every
// request counted through it. A command now fails after COMMAND_TIMEOUT_MS, and the connection it
// waited on is dropped and made again; until the new one answers, commands fail at once.
import type { FastifyBaseLogger } from 'fastify';
import type { Command, Redis } from 'ioredis';

/** Long enough for a distant Redis behind TLS; a host that drops packets is retried sooner. */
const CONNECT_TIMEOUT_MS = 2_000;
/**
 * Redis answers in well under a millisecond on a LAN; a command this late means it is not
 * answering. (An event loop blocked for longer would time its commands out too, and drop a good
 * connection: the requests then pass uncounted until it is made again, and an outage is logged.)
 */
export const COMMAND_TIMEOUT_MS = 1_000;
/** ioredis's message for a command past `commandTimeout`. */
const TIMED_OUT = 'Command timed out';

/** A client for `url`, connected when Redis answers; the process starts without it when not. */
export async function connectRedis(url: string): Promise<Redis> {
  // Loaded here, not on import: a server without Redis does not hold its client (bench/README.md).
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    lazyConnect: true,
    // A command sent while not connected fails rather than waiting for a connection.
    enableOfflineQueue: false,
    // A command in flight when the connection drops fails then, rather than after reconnects.
    maxRetriesPerRequest: 0,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
  });
  // Outages are logged by reportRedisOutages; without a listener ioredis prints every error.
  redis.on('error', () => {});
  // A command that timed out on a connection ioredis holds ready drops it (ioredis then
  // reconnects, as after any connection lost), reported as the error of the outage it begins.
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
    const sent = send(command, stream);
    command.promise.catch((error: Error) => {
      if (error.message !== TIMED_OUT || redis.status !== 'ready') return;
      redis.emit('error', new Error(`Redis did not answer a command within ${COMMAND_TIMEOUT_MS} ms`));
      redis.disconnect(true);
    });
    return sent;
  };
  // Connected before the first request, so that one is counted too; a failure leaves ioredis
  // retrying on its own.
  await redis.connect().catch(() => {});
  return redis;
}

/**
 * Logs when Redis stops answering and when it answers again: once per outage, not per request
 * nor per reconnect attempt. The URL is never logged (it may hold a password); the error is.
 */
export function reportRedisOutages(redis: Redis, log: FastifyBaseLogger): void {
  let lastError: string | undefined;
  let down = false;
  redis.on('error', (error: Error) => {
    lastError = error.message;
  });
  // ioredis reconnects after every connection lost other than by disconnect(), so this marks an
  // outage begun, or one that began before this listener was added (Redis down at start).
  redis.on('reconnecting', () => {
    if (down) return;
    down = true;
    log.warn(
      { err: lastError },
      'Redis does not answer: requests pass the rate limit uncounted and MCP slots are counted per instance until it does',
    );
  });
  redis.on('ready', () => {
    lastError = undefined;
    if (!down) return;
    down = false;
    log.info('Redis answers again: rate limits and MCP slots are shared again');
  });
}
