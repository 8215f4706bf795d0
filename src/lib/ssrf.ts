// Outbound HTTP to addresses users give us (website crawls, webhook deliveries) without letting
// them reach inside our network (SSRF). The host is resolved once, every address it resolves to
// must be public, and the connection goes to the address that was checked (a custom `lookup`
// pins it), so a DNS answer that changes between the check and the connect (rebinding) cannot
// slip a private address in. Redirects are followed only when the caller allows the next URL,
// and each hop is checked the same way. Every request has a timeout and a byte cap.
//
// Messages name the host the client sent, never an address it resolved to: they reach the client
// (a webhook's 422, a sync's error), and must not map the network the service sees.
//
// Written on node:http/https rather than fetch: fetch (undici) offers no per-request `lookup`.
import { lookup as dnsLookup } from 'node:dns/promises';
import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** The target is not allowed (not public, bad scheme) or could not be reached within the limits. */
export class OutboundRequestError extends Error {
  constructor(
    message: string,
    /** `blocked`: refused by policy; `network`: DNS, connect, TLS, timeout; `too_large`: byte cap. */
    readonly reason: 'blocked' | 'network' | 'too_large',
  ) {
    super(message);
    this.name = 'OutboundRequestError';
  }
}

// Addresses that are not on the public internet (IANA special-purpose registries).
const BLOCKED = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata lives here)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  BLOCKED.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['::', 96], // IPv4-compatible (deprecated)
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF protocol assignments (Teredo, ORCHID, …)
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  BLOCKED.addSubnet(net, prefix, 'ipv6');
}

/** The 16 bytes of an IPv6 address (with or without an embedded dotted quad). */
function ipv6Bytes(address: string): number[] | undefined {
  let text = address.split('%')[0] ?? '';
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    tail.push(...dotted[1].split('.').map(Number));
    text = `${text.slice(0, -dotted[1].length)}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((h) => Number.parseInt(h, 16)));
  const left = parse(head);
  const right = rest === undefined ? [] : parse(rest);
  const groups = rest === undefined ? left : [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
  if (groups.length !== 8 || groups.some((g) => Number.isNaN(g) || g < 0 || g > 0xffff)) return undefined;
  const bytes = groups.flatMap((g) => [g >> 8, g & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The IPv4 address an IPv6 address carries: mapped (::ffff:0:0/96), translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96), 6to4 (2002::/16). */
function embeddedIPv4(bytes: number[]): string | undefined {
  const zero = (from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);
  const quad = (from: number) => bytes.slice(from, from + 4).join('.');
  if (zero(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return quad(12);
  // IPv4-translated (::ffff:0:0/96, RFC 2765 SIIT): a translator reaches the IPv4 address.
  if (zero(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zero(10, 12)) return quad(12);
  if (bytes[0] === 0x00 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zero(4, 12)) return quad(12);
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return quad(2);
  return undefined;
}

/** Whether an IP address is on the public internet (IPv4 or IPv6, embedded IPv4 included). */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !BLOCKED.check(address, 'ipv4');
  if (family !== 6) return false;
  const bytes = ipv6Bytes(address);
  if (!bytes) return false;
  const v4 = embeddedIPv4(bytes);
  if (v4 !== undefined) return isPublicAddress(v4);
  if (bytes[0] === 0x00 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b) return false; // 64:ff9b:1::/48 local NAT64
  return !BLOCKED.check(address.split('%')[0] ?? '', 'ipv6');
}

export interface ResolvedTarget {
  address: string;
  family: 4 | 6;
}

/**
 * Resolves the URL's host and checks every address it names; the first one is the target.
 * Refuses non-HTTP(S) URLs, credentials in the URL, and (unless `allowPrivate`) any non-public address.
 */
export async function resolveTarget(url: URL, options: { allowPrivate: boolean }): Promise<ResolvedTarget> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new OutboundRequestError(`Only http and https URLs can be fetched, not '${url.protocol}'.`, 'blocked');
  }
  if (url.username || url.password) throw new OutboundRequestError('URLs with credentials are not fetched.', 'blocked');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await dnsLookup(host, { all: true, verbatim: true });
    } catch (error) {
      throw new OutboundRequestError(`Could not resolve ${host}: ${(error as Error).message}`, 'network');
    }
  }
  const first = addresses[0];
  if (!first) throw new OutboundRequestError(`${host} resolves to no address.`, 'network');
  if (!options.allowPrivate) {
    if (addresses.some((a) => !isPublicAddress(a.address))) {
      throw new OutboundRequestError(
        isIP(host)
          ? `${host} is not a public address; it is not fetched.`
          : `${host} resolves to an address that is not public; it is not fetched.`,
        'blocked',
      );
    }
  }
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}

export interface SafeRequestOptions {
  /** Refuse private, loopback, link-local and other non-public addresses unless true. */
  allowPrivate: boolean;
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Per request (each redirect hop gets its own). Default 10 s. */
  timeoutMs?: number;
  /** Bytes of body read at most; more fails with `too_large`, unless `truncate`. Default 5 MiB. */
  maxBytes?: number;
  /** Past `maxBytes`, stop reading and answer with the body so far, rather than fail. */
  truncate?: boolean;
  /** Redirects followed at most (GET and HEAD only). Default 0: a 3xx is returned as is. */
  maxRedirects?: number;
  /** Whether a redirect to `to` may be followed; a refused one is returned as is. */
  redirectAllowed?: (to: URL, from: URL) => boolean;
  signal?: AbortSignal;
}

export interface SafeResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The URL that answered (after redirects). */
  url: URL;
}

/** One HTTP(S) request to a checked, pinned address, following allowed redirects. */
export async function safeRequest(target: string | URL, options: SafeRequestOptions): Promise<SafeResponse> {
  let url = new URL(target);
  const maxRedirects = options.maxRedirects ?? 0;
  for (let hop = 0; ; hop++) {
    const response = await requestOnce(url, options);
    const location = response.headers.location;
    const method = (options.method ?? 'GET').toUpperCase();
    if (
      response.status >= 300 &&
      response.status < 400 &&
      location &&
      hop < maxRedirects &&
      (method === 'GET' || method === 'HEAD')
    ) {
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        return response;
      }
      if (options.redirectAllowed && !options.redirectAllowed(next, url)) return response;
      url = next;
      continue;
    }
    return response;
  }
}

async function requestOnce(url: URL, options: SafeRequestOptions): Promise<SafeResponse> {
  const target = await resolveTarget(url, { allowPrivate: options.allowPrivate });
  // Every connection of this request goes to the address that was checked.
  const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
    if ((lookupOptions as { all?: boolean }).all) {
      (callback as (err: null, addresses: { address: string; family: number }[]) => void)(null, [
        { address: target.address, family: target.family },
      ]);
    } else {
      callback(null, target.address, target.family);
    }
  };
  // Node's connect errors carry the address (`connect ECONNREFUSED 10.0.0.5:443`): named by host instead.
  const failure = (error: Error) =>
    new OutboundRequestError(`${url.href}: ${error.message.replaceAll(target.address, url.hostname)}`, 'network');
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxBytes = options.maxBytes ?? 5 * 1024 * 1024;
  const client = url.protocol === 'https:' ? https : http;

  return new Promise<SafeResponse>((resolve, reject) => {
    const request = client.request(
      url,
      {
        method: options.method ?? 'GET',
        headers: options.headers,
        lookup: pinned,
        agent: false,
        signal: options.signal,
      },
      (response) => {
        const answer = (body: Buffer) =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body, url });
        const declared = Number(response.headers['content-length']);
        if (Number.isFinite(declared) && declared > maxBytes && !options.truncate) {
          response.destroy();
          reject(
            new OutboundRequestError(
              `${url.href} answers ${declared} bytes; at most ${maxBytes} are read.`,
              'too_large',
            ),
          );
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxBytes) {
            response.destroy();
            if (options.truncate) {
              chunks.push(chunk.subarray(0, chunk.length - (size - maxBytes)));
              answer(Buffer.concat(chunks));
            } else {
              reject(new OutboundRequestError(`${url.href} answers more than ${maxBytes} bytes.`, 'too_large'));
            }
            return;
          }
          chunks.push(chunk);
        });
        response.on('end', () => answer(Buffer.concat(chunks)));
        response.on('error', (error) => reject(failure(error)));
      },
    );
    request.setTimeout(timeoutMs, () => {
      request.destroy(new Error(`no answer within ${timeoutMs} ms`));
    });
    const deadline = setTimeout(
      () => request.destroy(new Error(`no complete answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    deadline.unref();
    request.on('close', () => clearTimeout(deadline));
    request.on('error', (error) => {
      clearTimeout(deadline);
      reject(error instanceof OutboundRequestError ? error : failure(error));
    });
    if (options.body !== undefined) request.write(options.body);
    request.end();
  });
}
