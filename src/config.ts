// Configuration: environment variables only, parsed and validated once at start (DESIGN.md §1).
// A bad value stops the start with a one-line reason naming the variable.
import { isIP } from 'node:net';
import { type ModelPrices, parseModelPrices } from './domain/agent/model-prices.js';
import { SECRETS_KEY_BYTES } from './lib/secret-box.js';
import { exportProtocol } from './observability/export-protocol.js';

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /** Statements each PostgreSQL connection keeps prepared; 0 sends every statement unnamed. */
  databasePreparedStatements: number;
  redisUrl: string | undefined;
  /** Prefix of every Redis key this service writes, so deployments can share one Redis. */
  redisKeyPrefix: string;
  baseDomain: string;
  /** Public origin used in `doc_url` links; when unset, derived from the request's Host. */
  publicUrl: string | undefined;
  /**
   * Origin of the admin console that task links point at (`admin_url`); ADMIN_BASE_URL, else
   * `https://admin.<BASE_DOMAIN>`.
   */
  adminBaseUrl: string;
  adminToken: string | undefined;
  bodyLimitBytes: number;
  /** How long a client may take to send a request's body once its headers have arrived. */
  requestTimeoutMs: number;
  rateLimitPerMinute: number;
  /** MCP requests at once (MCP_MAX_CONCURRENT); one tenant may hold half of them, rounded up. */
  mcpMaxConcurrent: number;
  mcpSlotWaitMs: number;
  /** MCP event streams (GET /api/v1/mcp) one tenant may hold open on one process (MCP_MAX_STREAMS_PER_TENANT). */
  mcpMaxStreamsPerTenant: number;
  sseHeartbeatMs: number;
  /** Browser origins allowed to call /api/v1/mcp besides the API's own. */
  mcpAllowedOrigins: string[];
  allowPrivateTargets: boolean;
  /** Minutes between syncs of sources with `auto_sync_enabled`. */
  autoSyncIntervalMinutes: number;
  /** How often an idle job worker looks for due jobs. */
  jobPollMs: number;
  /** How long stopping waits for running jobs before aborting them (they are then retried). */
  jobStopGraceMs: number;
  /** On shutdown, how long requests are still served after /readyz turns 503 (SHUTDOWN_DELAY_MS). */
  shutdownDelayMs: number;
  /** One webhook delivery attempt may take this long (WEBHOOK_TIMEOUT_MS). */
  webhookTimeoutMs: number;
  /** Webhook deliveries one process attempts at once, in a job lane of their own (WEBHOOK_CONCURRENCY). */
  webhookConcurrency: number;
  /**
   * Of those, the deliveries of one tenant one process attempts at once (WEBHOOK_TENANT_CONCURRENCY,
   * default half of WEBHOOK_CONCURRENCY, at least 1): a tenant with slow receivers leaves the rest to others.
   */
  webhookTenantConcurrency: number;
  /** Delay before the first webhook retry, doubling per attempt (WEBHOOK_RETRY_BASE_MS). */
  webhookRetryBaseMs: number;
  /** Longest delay between two webhook attempts (WEBHOOK_RETRY_MAX_MS). */
  webhookRetryMaxMs: number;
  /**
   * Whom to believe about the client (X-Forwarded-For, -Proto, -Host), TRUST_PROXY: `false` nobody;
   * a number, that many proxies nearest us whatever their address (`true` is 1); a list, the
   * proxies at those addresses or in those CIDR ranges.
   */
  trustProxy: false | number | string[];
  /** Seals webhook signing secrets at rest (SECRETS_KEY: 32 bytes, base64 or hex); unset stores them as they are. */
  secretsKey: Buffer | undefined;
  /** The key before a change of SECRETS_KEY (SECRETS_KEY_PREVIOUS): what it sealed is sealed again under the new one. */
  secretsKeyPrevious: Buffer | undefined;
  llmBaseUrl: string | undefined;
  llmApiKey: string | undefined;
  llmModel: string | undefined;
  /** How long one call to the language model may take (LLM_TIMEOUT_MS). */
  llmTimeoutMs: number;
  /** Price per 1 000 input and output tokens by model, for the cost in turn traces (MODEL_PRICES, JSON). */
  modelPrices: ModelPrices;
  /** Turn traces store what was sent to the model (TRACE_PROMPTS, default false). */
  tracePrompts: boolean;
  /** How long a turn not in pause mode waits for client function results (CLIENT_FUNCTION_TIMEOUT_MS). */
  clientFunctionTimeoutMs: number;
  /** Streamed message turns one tenant may run at once on one process (TURN_MAX_STREAMS_PER_TENANT). */
  turnMaxStreamsPerTenant: number;
  /** Turns of one tenant one process holds waiting for client function results (TURN_MAX_WAITING_PER_TENANT). */
  turnMaxWaitingPerTenant: number;
  /** Test cases one simulation run plays at once (SIMULATION_CONCURRENCY). */
  simulationConcurrency: number;
  /** How long one dashboard analytics report may take before it answers `export_failed` (ANALYTICS_TIMEOUT_MS). */
  analyticsTimeoutMs: number;
  /** How long a full-text search may wait for a slot, then run, before it is refused (SEARCH_TIMEOUT_MS). */
  searchTimeoutMs: number;
  /**
   * Full-text searches and dashboard reports running at once in this process (SEARCH_MAX_CONCURRENT;
   * half the database pool on PostgreSQL, 1 on PGlite); one tenant may hold half of them, rounded up.
   */
  searchMaxConcurrent: number;
  /** Custom data sources one workspace may hold, each a table (CUSTOM_DATA_SOURCES_MAX). */
  customDataSourcesMax: number;
  /** An OpenAI-compatible embeddings API root (EMBEDDINGS_BASE_URL); unset: retrieval is lexical only. */
  embeddingsBaseUrl: string | undefined;
  embeddingsApiKey: string | undefined;
  /** The embeddings model (EMBEDDINGS_MODEL), required with EMBEDDINGS_BASE_URL. */
  embeddingsModel: string | undefined;
  /** How long one call to the embeddings server may take (EMBEDDINGS_TIMEOUT_MS). */
  embeddingsTimeoutMs: number;
  /**
   * The cosine similarity at which a passage answers the question (EMBEDDINGS_MIN_SIMILARITY): it
   * maps onto the relevance threshold of the lexical rank (src/domain/knowledge/fused-search.ts).
   */
  embeddingsMinSimilarity: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got '${raw}'`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** A number strictly between 0 and 1. */
function fraction(env: Env, name: string, fallback: number): number {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  const n = /^(0|1)?\.\d+$|^[01]$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n > 0 && n < 1)) throw new ConfigError(`${name} must be a number between 0 and 1 (exclusive), got '${raw}'`);
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  if (/^(true|1|yes)$/i.test(raw)) return true;
  if (/^(false|0|no)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got '${raw}'`);
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = str(env, name);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    // Credentials masked up to the last `@`: a password may hold `/` or `@` (which is why it failed).
    throw new ConfigError(`${name} must be a URL, got '${raw.replace(/\/\/.*@/, '//***@')}'`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got '${parsed.protocol}'`);
  }
  return raw;
}

function origins(env: Env, name: string): string[] {
  const raw = str(env, name);
  if (raw === undefined) return [];
  return raw.split(',').map((item) => {
    const value = item.trim();
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      throw new ConfigError(`${name} must be a comma-separated list of origins, got '${value}'`);
    }
    if (parsed.origin !== value.replace(/\/+$/, '')) {
      throw new ConfigError(`${name} takes origins (scheme://host[:port]), got '${value}'`);
    }
    return parsed.origin;
  });
}

const MAX_PROXY_HOPS = 32;

/** An IP address, or a CIDR range of at least one bit (`0.0.0.0/0` would trust every client). */
function isAddressOrRange(value: string): boolean {
  const [address = '', prefix, ...rest] = value.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && +prefix >= 1 && +prefix <= (family === 4 ? 32 : 128));
}

/**
 * TRUST_PROXY. The client writes the left of X-Forwarded-For; each proxy appends the address it
 * saw. So the client is the entry the last trusted proxy added: trusting every hop (Fastify's
 * `true`) would take whatever the client wrote, and let it pick a new address per request.
 */
function trustProxy(env: Env, name: string): false | number | string[] {
  const raw = str(env, name);
  if (raw === undefined || /^(false|no|0)$/i.test(raw)) return false;
  if (/^(true|yes)$/i.test(raw)) return 1;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > MAX_PROXY_HOPS) throw new ConfigError(`${name} must be at most ${MAX_PROXY_HOPS} proxies, got ${hops}`);
    return hops;
  }
  const addresses = raw.split(',').map((item) => item.trim());
  const bad = addresses.find((item) => !isAddressOrRange(item));
  if (bad !== undefined) {
    throw new ConfigError(
      `${name} must be true, false, a number of proxies or a comma-separated list of proxy IP addresses or CIDR ranges, got '${bad}'`,
    );
  }
  return addresses;
}

/** 32 bytes written as 64 hex digits or as base64 (or base64url). */
function secretsKey(env: Env, name: string): Buffer | undefined {
  const raw = str(env, name);
  if (raw === undefined) return undefined;
  const key = /^[0-9a-f]{64}$/i.test(raw)
    ? Buffer.from(raw, 'hex')
    : /^[A-Za-z0-9+/_-]+={0,2}$/.test(raw)
      ? Buffer.from(raw, 'base64')
      : undefined;
  if (key?.length !== SECRETS_KEY_BYTES) {
    // The value itself is a secret: it is not repeated.
    throw new ConfigError(
      `${name} must be ${SECRETS_KEY_BYTES} random bytes as base64 or 64 hex digits (openssl rand -base64 32)`,
    );
  }
  return key;
}

export function loadConfig(env: Env = process.env): Config {
  const logLevel = str(env, 'LOG_LEVEL') ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${logLevel}'`);
  }
  const adminToken = str(env, 'ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError('ADMIN_TOKEN must be at least 16 characters long');
  }
  // `Authorization: Bearer <token>` carries one word: a token with a space could never be sent.
  if (adminToken !== undefined && /\s/.test(adminToken)) {
    throw new ConfigError('ADMIN_TOKEN must not contain spaces or other whitespace');
  }
  // Hosts are compared without a fully qualified name's trailing dot, so BASE_DOMAIN is too: kept,
  // no tenant host would end with it and every key would be good on every tenant's host.
  const baseDomainRaw = (str(env, 'BASE_DOMAIN') ?? 'localhost').toLowerCase();
  const baseDomain = baseDomainRaw.replace(/\.$/, '');
  if (!/^[a-z0-9-]+(?:\.[a-z0-9-]+)*$/.test(baseDomain)) {
    throw new ConfigError(`BASE_DOMAIN must be a host name, got '${baseDomainRaw}'`);
  }
  // Tracing's encoding is read when tracing starts; a value it cannot send in stops the start here.
  if (str(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') || str(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')) {
    try {
      exportProtocol(env);
    } catch (error) {
      throw new ConfigError((error as Error).message);
    }
  }
  const publicUrl = url(env, 'PUBLIC_URL', ['http:', 'https:']);
  const sealingKey = secretsKey(env, 'SECRETS_KEY');
  const previousSealingKey = secretsKey(env, 'SECRETS_KEY_PREVIOUS');
  if (previousSealingKey !== undefined && sealingKey === undefined) {
    throw new ConfigError('SECRETS_KEY_PREVIOUS is the key before a change of SECRETS_KEY: set SECRETS_KEY too');
  }
  const webhookConcurrency = int(env, 'WEBHOOK_CONCURRENCY', 8, 1, 256);
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const embeddingsBaseUrl = url(env, 'EMBEDDINGS_BASE_URL', ['http:', 'https:']);
  const embeddingsModel = str(env, 'EMBEDDINGS_MODEL');
  if (embeddingsBaseUrl !== undefined && embeddingsModel === undefined) {
    throw new ConfigError(
      'EMBEDDINGS_MODEL must be set with EMBEDDINGS_BASE_URL: name the embeddings model to ask for',
    );
  }
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: str(env, 'HOST') ?? '127.0.0.1',
    dataDir: str(env, 'DATA_DIR') ?? './data',
    databaseUrl,
    databasePreparedStatements: int(env, 'DATABASE_PREPARED_STATEMENTS', 200, 0, 10_000),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisKeyPrefix: str(env, 'REDIS_KEY_PREFIX') ?? 'workspace:',
    baseDomain,
    publicUrl: publicUrl?.replace(/\/+$/, ''),
    adminBaseUrl: (url(env, 'ADMIN_BASE_URL', ['http:', 'https:']) ?? `https://admin.${baseDomain}`).replace(
      /\/+$/,
      '',
    ),
    adminToken,
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 5 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    requestTimeoutMs: int(env, 'REQUEST_TIMEOUT_MS', 60_000, 1000, 3_600_000),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 1200, 1, 10_000_000),
    mcpMaxConcurrent: int(env, 'MCP_MAX_CONCURRENT', 16, 1, 10_000),
    mcpSlotWaitMs: int(env, 'MCP_SLOT_WAIT_MS', 2000, 0, 60_000),
    mcpMaxStreamsPerTenant: int(env, 'MCP_MAX_STREAMS_PER_TENANT', 20, 1, 100_000),
    sseHeartbeatMs: int(env, 'SSE_HEARTBEAT_MS', 15_000, 100, 3_600_000),
    mcpAllowedOrigins: origins(env, 'MCP_ALLOWED_ORIGINS'),
    allowPrivateTargets: bool(env, 'ALLOW_PRIVATE_TARGETS', false),
    autoSyncIntervalMinutes: int(env, 'AUTO_SYNC_INTERVAL_MINUTES', 1440, 1, 525_600),
    jobPollMs: int(env, 'JOB_POLL_MS', 1000, 10, 600_000),
    jobStopGraceMs: int(env, 'JOB_STOP_GRACE_MS', 10_000, 0, 600_000),
    shutdownDelayMs: int(env, 'SHUTDOWN_DELAY_MS', 0, 0, 300_000),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
    webhookConcurrency,
    webhookTenantConcurrency: int(
      env,
      'WEBHOOK_TENANT_CONCURRENCY',
      Math.max(1, Math.floor(webhookConcurrency / 2)),
      1,
      webhookConcurrency,
    ),
    webhookRetryBaseMs: int(env, 'WEBHOOK_RETRY_BASE_MS', 30_000, 1, 3_600_000),
    webhookRetryMaxMs: int(env, 'WEBHOOK_RETRY_MAX_MS', 4 * 3_600_000, 1, 24 * 3_600_000),
    trustProxy: trustProxy(env, 'TRUST_PROXY'),
    secretsKey: sealingKey,
    secretsKeyPrevious: previousSealingKey,
    llmBaseUrl: url(env, 'LLM_BASE_URL', ['http:', 'https:']),
    llmApiKey: str(env, 'LLM_API_KEY'),
    llmModel: str(env, 'LLM_MODEL'),
    llmTimeoutMs: int(env, 'LLM_TIMEOUT_MS', 60_000, 100, 600_000),
    modelPrices: parseModelPrices(str(env, 'MODEL_PRICES'), (message) => new ConfigError(message)),
    tracePrompts: bool(env, 'TRACE_PROMPTS', false),
    clientFunctionTimeoutMs: int(env, 'CLIENT_FUNCTION_TIMEOUT_MS', 60_000, 100, 3_600_000),
    turnMaxStreamsPerTenant: int(env, 'TURN_MAX_STREAMS_PER_TENANT', 20, 1, 100_000),
    turnMaxWaitingPerTenant: int(env, 'TURN_MAX_WAITING_PER_TENANT', 50, 1, 100_000),
    simulationConcurrency: int(env, 'SIMULATION_CONCURRENCY', 4, 1, 32),
    analyticsTimeoutMs: int(env, 'ANALYTICS_TIMEOUT_MS', 15_000, 1, 600_000),
    searchTimeoutMs: int(env, 'SEARCH_TIMEOUT_MS', 5_000, 1, 600_000),
    searchMaxConcurrent: int(env, 'SEARCH_MAX_CONCURRENT', databaseUrl ? 5 : 1, 1, 1000),
    customDataSourcesMax: int(env, 'CUSTOM_DATA_SOURCES_MAX', 100, 1, 100_000),
    embeddingsBaseUrl,
    embeddingsApiKey: str(env, 'EMBEDDINGS_API_KEY'),
    embeddingsModel,
    embeddingsTimeoutMs: int(env, 'EMBEDDINGS_TIMEOUT_MS', 30_000, 100, 600_000),
    embeddingsMinSimilarity: fraction(env, 'EMBEDDINGS_MIN_SIMILARITY', 0.5),
    logLevel: logLevel as Config['logLevel'],
  };
}
