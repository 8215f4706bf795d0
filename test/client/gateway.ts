// A gateway in front of a real server, for the typed client's tests: it forwards each request to
// the server unless told to fail the next ones as a proxy or a network can — drop the connection
// before forwarding, forward and then drop it before answering, answer 503 itself, never answer,
// or cut the answer after some bytes. It records what it was sent.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type Fault =
  | 'pass'
  /** The connection is closed before the request reaches the server. */
  | 'drop'
  /** The server runs the request; its answer is lost (the connection closed instead). */
  | 'drop-after'
  /** A 503 of the gateway's own, `Retry-After: 1`, HTML body. */
  | 'unavailable'
  /** No answer at all. */
  | 'hang'
  /** The answer's headers and its first `frames` SSE frames, then the connection is closed. */
  | { cutAfterFrames: number };

export interface Sent {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
}

export async function startGateway(target: string) {
  const faults: Fault[] = [];
  const sent: Sent[] = [];
  const server = http.createServer((req, res) => {
    sent.push({ method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers });
    const fault = faults.shift() ?? 'pass';
    if (fault === 'drop') return void req.socket.destroy();
    if (fault === 'hang') return;
    if (fault === 'unavailable') {
      res.writeHead(503, { 'retry-after': '1', 'content-type': 'text/html' });
      return void res.end('<html><body>503 Service Unavailable</body></html>');
    }
    const upstream = http.request(new URL(req.url ?? '/', target), { method: req.method, headers: req.headers });
    upstream.on('error', () => req.socket.destroy());
    upstream.on('response', (answer) => {
      if (fault === 'drop-after') {
        answer.resume();
        answer.on('end', () => req.socket.destroy());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      let frames = typeof fault === 'object' ? fault.cutAfterFrames : Number.POSITIVE_INFINITY;
      answer.on('data', (chunk: Buffer) => {
        if (frames <= 0) return;
        const text = chunk.toString('utf8');
        let end = 0;
        while (frames > 0) {
          const next = text.indexOf('\n\n', end);
          if (next === -1) break;
          end = next + 2;
          frames--;
        }
        if (frames > 0) return void res.write(chunk);
        res.write(text.slice(0, end), () => req.socket.destroy());
        answer.destroy();
      });
      answer.on('end', () => res.end());
    });
    req.pipe(upstream);
  });
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** Faults for the next requests, in order; then requests pass. */
    fail: (...next: Fault[]) => faults.push(...next),
    sent,
    /** Connections from clients still open. */
    openConnections: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
