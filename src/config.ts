// Configuration: environment variables only, parsed and validated once at start (DESIGN.md §1).
// A bad value stops the start with a one-line reason naming the variable.

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  baseDomain: string;
  /** Public origin used in `doc_url` links; when unset, derived from the request's Host. */
  publicUrl: string | undefined;
  adminToken: string | undefined;
  bodyLimitBytes: number;
  rateLimitPerMinute: number;
  mcpMaxConcurrent: number;
  mcpSlotWaitMs: number;
  sseHeartbeatMs: number;
  allowPrivateTargets: boolean;
  trustProxy: boolean;
  llmBaseUrl: string | undefined;
  llmApiKey: string | undefined;
  llmModel: string | undefined;
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
    throw new ConfigError(`${name} must be a URL, got '${raw.replace(/\/\/[^@/]*@/, '//***@')}'`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got '${parsed.protocol}'`);
  }
  return raw;
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
  const baseDomain = (str(env, 'BASE_DOMAIN') ?? 'localhost').toLowerCase();
  if (!/^[a-z0-9.-]+$/.test(baseDomain)) throw new ConfigError(`BASE_DOMAIN must be a host name, got '${baseDomain}'`);
  const publicUrl = url(env, 'PUBLIC_URL', ['http:', 'https:']);
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: str(env, 'HOST') ?? '127.0.0.1',
    dataDir: str(env, 'DATA_DIR') ?? './data',
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    baseDomain,
    publicUrl: publicUrl?.replace(/\/+$/, ''),
    adminToken,
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 5 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 1200, 1, 10_000_000),
    mcpMaxConcurrent: int(env, 'MCP_MAX_CONCURRENT', 16, 1, 10_000),
    mcpSlotWaitMs: int(env, 'MCP_SLOT_WAIT_MS', 2000, 0, 60_000),
    sseHeartbeatMs: int(env, 'SSE_HEARTBEAT_MS', 15_000, 100, 3_600_000),
    allowPrivateTargets: bool(env, 'ALLOW_PRIVATE_TARGETS', false),
    trustProxy: bool(env, 'TRUST_PROXY', false),
    llmBaseUrl: url(env, 'LLM_BASE_URL', ['http:', 'https:']),
    llmApiKey: str(env, 'LLM_API_KEY'),
    llmModel: str(env, 'LLM_MODEL'),
    logLevel: logLevel as Config['logLevel'],
  };
}
