// The noisy neighbour's attacks, in a process of their own (so that making and sending them costs
// the server's process nothing): a stranger's and an attacking tenant's worst bodies, 5 MB of
// millions of values or nesting millions deep, to unknown paths, bodiless endpoints, the sign-in
// form, a row (with a key and without) and MCP, sent in turn from `concurrency` loops until the
// parent says stop; then it sends the parent `{ sent, statuses }` (status → count; 0: no answer).
// Used by test/proof/noisy-neighbour.test.ts and bench/noisy-neighbour.ts.
// Usage: node bench/noisy-attacker.mjs <base URL> <attacking tenant's key> <concurrency>
const [base, key, concurrency = '4'] = process.argv.slice(2);

const flat = Buffer.from(`{"a":[${'1,'.repeat(2_500_000)}1]}`);
const row = Buffer.from(`{"data":{"a":[${'1,'.repeat(2_500_000)}1]}}`);
const deep = Buffer.from('['.repeat(5_000_000));
const json = { 'content-type': 'application/json' };
const mcp = { ...json, accept: 'application/json, text/event-stream', 'x-api-key': key };
const attacks = [
  ['POST', '/no-such-path', json, flat],
  ['POST', '/healthz', json, flat],
  ['POST', '/admin/login', json, flat],
  ['PUT', '/api/v1/custom-data-sources/junk/rows/x', { ...json, 'x-api-key': 'wsk_not_a_key' }, row],
  ['PUT', '/api/v1/custom-data-sources/junk/rows/x', { ...json, 'x-api-key': key }, row],
  ['POST', '/api/v1/mcp', mcp, flat],
  ['POST', '/api/v1/mcp', mcp, deep],
  ['POST', '/api/v1/apps', { ...json, 'x-api-key': key }, deep],
];

let running = true;
let sent = 0;
const statuses = {};
process.on('message', () => {
  running = false;
});
process.send?.('ready');
await Promise.all(
  Array.from({ length: Number(concurrency) }, async (_, worker) => {
    for (let i = worker; running; i++) {
      const [method, path, headers, body] = attacks[i % attacks.length];
      const status = await fetch(`${base}${path}`, { method, headers, body }).then(
        async (response) => {
          await response.arrayBuffer();
          return response.status;
        },
        () => 0,
      );
      statuses[status] = (statuses[status] ?? 0) + 1;
      sent++;
    }
  }),
);
process.send?.({ sent, statuses });
process.disconnect?.();
