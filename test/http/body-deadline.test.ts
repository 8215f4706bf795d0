// The body deadline (src/http/body-deadline.ts) on a real Fastify server and real sockets: a body
// that does not arrive in time is refused, and every request watched is forgotten once it is done
// with, so the watch keeps nothing alive.

import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { registerBodyDeadline } from '../../src/http/body-deadline.js';

const TIMEOUT_MS = 200;

let app: FastifyInstance;
let watched: { readonly size: number };
let refused: number;

async function start(timeoutMs = TIMEOUT_MS): Promise<number> {
  app = Fastify();
  refused = 0;
  watched = registerBodyDeadline(app, {
    timeoutMs,
    refuse: (error, socket) => {
      refused++;
      socket.end(
        `HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: ${error.code.length}\r\n\r\n${error.code}`,
      );
    },
  });
  // Each answers with the number of requests watched while it ran.
  app.post('/echo', async () => ({ watched: watched.size }));
  app.get('/echo', async () => ({ watched: watched.size }));
  // Answers before its body is read, as a refused key does.
  app.post(
    '/early',
    { preParsing: async (_request, reply) => reply.code(401).send({ refused: true }) },
    async () => ({}),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  return (app.server.address() as AddressInfo).port;
}

afterEach(async () => {
  await app?.close();
});

/** Opens a connection, writes `text`, and collects what comes back until it closes. */
function send(port: number, text: string): { socket: Socket; answer: Promise<string> } {
  const socket = connect(port, '127.0.0.1', () => socket.write(text));
  const answer = new Promise<string>((resolve, reject) => {
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk;
    });
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
  });
  return { socket, answer };
}

const until = async (check: () => boolean, withinMs = 2000) => {
  for (let i = 0; i < withinMs / 10 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(check()).toBe(true);
};

const post = (path: string, declared: number, body: string) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n${body}`;

describe('the body deadline', () => {
  it('forgets a request with a body once it is answered, and never watches one without', async () => {
    // A deadline of 4 s, swept every second: forgotten when answered, not at the next sweep.
    const port = await start(4000);
    const body = JSON.stringify({ a: 1 });
    for (let i = 0; i < 3; i++) {
      const answer = await fetch(`http://127.0.0.1:${port}/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(await answer.json()).toEqual({ watched: 1 });
      await until(() => watched.size === 0, 300);
    }
    // A GET is not watched.
    expect(await (await fetch(`http://127.0.0.1:${port}/echo`)).json()).toEqual({ watched: 0 });
  });

  it('refuses a body still arriving after the deadline, even one sent a byte at a time', async () => {
    const port = await start();
    // Headers and part of a body: watched until it is refused.
    const partial = send(port, post('/echo', 100, '{"a":'));
    await until(() => watched.size === 1);
    expect(await partial.answer).toMatch(/^HTTP\/1.1 400 .*ERR_HTTP_REQUEST_TIMEOUT$/s);
    expect(refused).toBe(1);
    expect(watched.size).toBe(0);

    const { socket, answer } = send(port, post('/echo', 100, '{'));
    const dribble = setInterval(() => socket.writable && socket.write(' '), 20);
    const started = Date.now();
    try {
      // Refused at its deadline, not when its 100 bytes would have arrived (about 2 s).
      expect(await answer).toMatch(/^HTTP\/1.1 400 .*ERR_HTTP_REQUEST_TIMEOUT$/s);
    } finally {
      clearInterval(dribble);
    }
    expect(refused).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(Date.now() - started).toBeLessThan(1500);
    expect(watched.size).toBe(0);
  });

  it('closes the connection of a request answered before its body, when the body does not come', async () => {
    const port = await start();
    const { answer } = send(port, post('/early', 100, '{"a":'));
    const text = await answer;
    // One answer (the route's 401), then the connection closed, not refused a second time.
    expect(text).toMatch(/^HTTP\/1.1 401 /);
    expect(text.match(/HTTP\/1.1/g)).toHaveLength(1);
    expect(refused).toBe(0);
    expect(watched.size).toBe(0);
  });

  it('forgets a request answered before its body once its client goes away, at the next sweep', async () => {
    // A deadline of 4 s, swept every second.
    const port = await start(4000);
    const { socket, answer } = send(port, post('/early', 100, '{"a":'));
    socket.on('data', () => socket.destroy());
    expect(await answer).toMatch(/^HTTP\/1.1 401 /);
    expect(watched.size).toBe(1);
    await until(() => watched.size === 0, 2500);
    expect(refused).toBe(0);
  });

  it('forgets a request whose client went away before its body arrived', async () => {
    const port = await start();
    const { socket, answer } = send(port, post('/echo', 100, '{"a":'));
    await until(() => watched.size === 1);
    socket.destroy();
    await answer;
    await until(() => watched.size === 0);
    expect(refused).toBe(0);
  });
});
