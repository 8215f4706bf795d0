// The floor of the benchmark of record: a bare Fastify route that runs the point query through
// the API's own database layer (openDatabase: the same pool and prepared statements on
// PostgreSQL, the same PGlite thread otherwise) and answers the row as JSON. No key, no rate
// limit, no validation or schema serialization, no hooks: what any Fastify server on this machine
// pays for an HTTP request that reads one row. run.ts starts it as its own process.
// Environment: PORT, and DATABASE_URL + BENCH_SCHEMA or DATA_DIR (where run.ts made the table).
import Fastify from 'fastify';
import { openDatabase } from '../src/db/client.js';
import { pointQuery } from './point.js';

const database = await openDatabase({
  url: process.env.DATABASE_URL,
  schema: process.env.BENCH_SCHEMA,
  dataDir: process.env.DATA_DIR,
});
const db = database.db as never;
const app = Fastify();
app.get('/healthz', async () => ({ status: 'ok' }));
app.get<{ Params: { id: string } }>('/rows/:id', async (request, reply) => {
  const row = await pointQuery(db, request.params.id);
  if (!row) return reply.code(404).send({ error: 'not found' });
  return row;
});
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
