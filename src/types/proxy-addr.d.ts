// proxy-addr (what Fastify reads X-Forwarded-For with) ships no types; what src/app.ts uses of it.
declare module 'proxy-addr' {
  import type { IncomingMessage } from 'node:http';

  type Trust = (address: string, hop: number) => boolean;
  /** The client's address: the last one `trust` does not vouch for, walking from the socket's. */
  function proxyAddr(request: IncomingMessage, trust: Trust): string;
  namespace proxyAddr {
    /** A trust function for these addresses and CIDR ranges. */
    function compile(addresses: string | string[]): Trust;
  }
  export = proxyAddr;
}
