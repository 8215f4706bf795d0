// Comment writes coalesced (src/domain/tasks/tasks.ts, src/db/coalesce.ts): comments made while a
// tenant's statements run share one statement, and each still comes to what its own statement
// would have: written with its mentions and notifications, or refused with its own error, and
// never another's. The service is called directly, in one turn, so that which comments wait is
// certain; every statement that writes comments is recorded from the app's database handle.
import { type CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/client.js';
import { lockUser } from '../../src/domain/accounts/users.js';
import { COMMENT_WRITE_COALESCING } from '../../src/domain/tasks/tasks.js';
import { startTestApp, type TestApp, usingPostgres } from '../helpers.js';

/** The statements that wrote comments, each as the tenant it named and its comments' ids. */
const statements: { tenantId: unknown; commentIds: unknown }[] = [];
/** Set: a statement of several comments runs, and then its answer is lost, as with a dropped connection. */
let loseSharedAnswers = false;
/** Set: once a statement of several comments is refused, the database goes away for the statements after it. */
let outageAfterRefusal = false;
let outage = false;

/** The app's handle, recording the statements that write comments (`WRITE_COMMENTS`). */
function recording(db: Db): Db {
  return new Proxy(db, {
    get(target, property) {
      if (property === 'executeQuery') {
        return (query: CompiledQuery) => {
          if (!query.sql.includes('insert into task_comments')) return target.executeQuery(query);
          statements.push({ tenantId: query.parameters[0], commentIds: query.parameters[2] });
          const shared = (query.parameters[2] as unknown[]).length > 1;
          if (outage) return Promise.reject(new Error('Connection terminated unexpectedly'));
          if (outageAfterRefusal && shared) {
            return target.executeQuery(query).catch((error: unknown) => {
              outage = true;
              throw error;
            });
          }
          if (!loseSharedAnswers || !shared) return target.executeQuery(query);
          return target.executeQuery(query).then(() => {
            throw new Error('Connection terminated unexpectedly');
          });
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({}, { wrapDb: recording });
});
afterAll(() => t.close());

const MISSING = '0190a0e0-0000-7000-8000-000000000000';

async function workspace() {
  const { tenantId, key } = await t.tenant();
  const user = async (name: string) =>
    (
      await t.call({
        method: 'POST',
        url: '/api/v1/users',
        key,
        body: { email: `${name.toLowerCase()}@example.com`, name },
      })
    ).body as { id: string; name: string; email: string };
  const ada = await user('Ada');
  const grace = await user('Grace');
  const task = (await t.call({ method: 'POST', url: '/api/v1/tasks', key, body: { title: 'Refunds' } })).body as {
    id: string;
    identifier: string;
  };
  return { tenantId, key, ada, grace, task };
}

const caller = { keyId: MISSING, keyName: 'Bench key' };

describe('comment writes coalesced', () => {
  it('comments made at once share statements per tenant, and each comes to what its own would have', async () => {
    const a = await workspace();
    const b = await workspace();
    statements.length = 0;
    const add = (w: typeof a, ref: string, input: Parameters<TestApp['services']['tasks']['addComment']>[2]) =>
      t.services.tasks.addComment(w.tenantId, ref, input, caller);
    // Made in one turn: the first of each tenant goes alone, the rest of the turn's go together.
    const made = await Promise.allSettled([
      add(a, a.task.id, { content: 'a1' }),
      add(a, a.task.identifier, { content: 'a2', mention_ids: [a.grace.id] }),
      add(b, b.task.id, { content: 'b1' }),
      add(a, a.task.id, { content: 'a3', mention_ids: [a.ada.id, a.grace.id.toUpperCase()], author_id: a.ada.id }),
      add(a, 'TASK-99', { content: 'missing task' }),
      add(a, a.task.id, { content: 'missing user', mention_ids: [a.grace.id, MISSING] }),
      add(a, a.task.id, { content: 'user of another workspace', author_id: b.ada.id }),
      add(b, b.task.identifier, { content: 'b2', mention_ids: [b.grace.id, b.grace.id] }),
      add(b, b.task.id, { content: 'b3', mention_ids: [a.grace.id] }),
      add(a, a.task.id, { content: 'a4', mention_ids: [a.grace.id], author_id: a.grace.id }),
      add(b, b.task.id, { content: 'b4', author_id: b.grace.id }),
    ]);
    const value = (i: number) => {
      const outcome = made[i];
      if (outcome?.status !== 'fulfilled') throw new Error(`comment ${i} failed: ${String(outcome?.reason)}`);
      return outcome.value;
    };
    const reason = (i: number) => {
      const outcome = made[i];
      if (outcome?.status !== 'rejected') throw new Error(`comment ${i} was written`);
      return outcome.reason as { code: string; param?: string };
    };
    const person = (user: { id: string; name: string; email: string }) => ({
      id: user.id,
      name: user.name,
      email: user.email,
    });
    const byKey = { id: MISSING, name: 'Bench key', email: null };

    expect(value(0)).toMatchObject({ content: 'a1', mentions: [], author: byKey, task_id: a.task.id });
    expect(value(1)).toMatchObject({ content: 'a2', mentions: [person(a.grace)], author: byKey });
    expect(value(2)).toMatchObject({ content: 'b1', task_id: b.task.id });
    expect(value(3)).toMatchObject({
      content: 'a3',
      mentions: [person(a.ada), person(a.grace)],
      author: person(a.ada),
    });
    expect(reason(4)).toMatchObject({ code: 'not_found' });
    expect(reason(5)).toMatchObject({ code: 'invalid_parameters', param: 'mention_ids[1]' });
    expect(reason(6)).toMatchObject({ code: 'invalid_parameters', param: 'author_id' });
    expect(value(7)).toMatchObject({ content: 'b2', mentions: [person(b.grace)] });
    expect(reason(8)).toMatchObject({ code: 'invalid_parameters', param: 'mention_ids[0]' });
    expect(value(9)).toMatchObject({ content: 'a4', mentions: [person(a.grace)], author: person(a.grace) });
    expect(value(10)).toMatchObject({ content: 'b4', mentions: [], author: person(b.grace) });

    // One alone per tenant, then one statement for each tenant's others, sent beside it at the end
    // of the turn: never a statement for two tenants.
    expect(COMMENT_WRITE_COALESCING.maxInFlight).toBe(2);
    expect(statements).toHaveLength(4);
    expect(statements.filter((s) => s.tenantId === a.tenantId).map((s) => (s.commentIds as string[]).length)).toEqual([
      1, 6,
    ]);
    expect(statements.filter((s) => s.tenantId === b.tenantId).map((s) => (s.commentIds as string[]).length)).toEqual([
      1, 3,
    ]);

    // What was written is what was answered, and nothing of the comments refused.
    const listed = async (w: typeof a) =>
      (await t.call({ url: `/api/v1/tasks/${w.task.id}/comments`, key: w.key })).body.data as { content: string }[];
    expect((await listed(a)).map((c) => c.content).sort()).toEqual(['a1', 'a2', 'a3', 'a4']);
    expect((await listed(b)).map((c) => c.content).sort()).toEqual(['b1', 'b2', 'b4']);
    expect((await listed(a)).find((c) => c.content === 'a3')).toEqual(value(3));

    // Notifications: the users mentioned, not the author, each with its comment's author and task.
    const notified = async (w: typeof a, user: { id: string }) =>
      (
        (await t.call({ url: `/api/v1/users/${user.id}/notifications`, key: w.key })).body.data as {
          comment_id: string;
          message: string;
        }[]
      )
        .map((n) => [n.comment_id, n.message])
        .sort();
    expect(await notified(a, a.grace)).toEqual(
      [
        [value(1).id, `Bench key mentioned you on ${a.task.identifier}: Refunds`],
        [value(3).id, `Ada mentioned you on ${a.task.identifier}: Refunds`],
      ].sort(),
    );
    expect(await notified(a, a.ada)).toEqual([]);
    expect(await notified(b, b.grace)).toEqual([
      [value(7).id, `Bench key mentioned you on ${b.task.identifier}: Refunds`],
    ]);
  });

  it('a shared statement that fails is tried one comment at a time: the others are written, the one at fault alone fails', async () => {
    const w = await workspace();
    // A rule of the database's own that one comment breaks: its shared statement fails as a whole.
    await sql`alter table task_comments add constraint no_poison check (content <> 'poison')`.execute(t.database.db);
    try {
      statements.length = 0;
      const add = (content: string) =>
        t.services.tasks.addComment(w.tenantId, w.task.id, { content, mention_ids: [w.grace.id] }, caller);
      const made = await Promise.allSettled(['one', 'two', 'three', 'poison', 'four', 'five'].map(add));
      expect(made.map((m) => m.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
        'fulfilled',
      ]);
      expect(String((made[3] as PromiseRejectedResult).reason)).toMatch(/no_poison/);
      // One alone, the five of its turn together (failed), then each of them alone.
      expect(statements.map((s) => (s.commentIds as string[]).length)).toEqual([1, 5, 1, 1, 1, 1, 1]);
      const listed = (await t.call({ url: `/api/v1/tasks/${w.task.id}/comments`, key: w.key })).body.data as {
        content: string;
      }[];
      expect(listed.map((c) => c.content).sort()).toEqual(['five', 'four', 'one', 'three', 'two']);
      const notes = (await t.call({ url: `/api/v1/users/${w.grace.id}/notifications`, key: w.key })).body.data;
      expect(notes).toHaveLength(5);

      // The database goes away while they are tried in turn: the first retry's failure is the
      // answer of those after it, which are not each tried against it.
      statements.length = 0;
      outageAfterRefusal = true;
      const during = await Promise.allSettled(['six', 'seven', 'eight', 'poison', 'nine', 'ten'].map(add));
      expect(during.map((m) => m.status)).toEqual(['fulfilled', ...Array(5).fill('rejected')]);
      for (const failed of during.slice(1)) {
        expect(String((failed as PromiseRejectedResult).reason)).toMatch(/Connection terminated/);
      }
      expect(statements.map((s) => (s.commentIds as string[]).length)).toEqual([1, 5, 1]);
    } finally {
      outageAfterRefusal = false;
      outage = false;
      await sql`alter table task_comments drop constraint no_poison`.execute(t.database.db);
    }
  });

  it('with an endpoint subscribed, comments that waited together are each written once, with their event', async () => {
    const w = await workspace();
    const endpoint = await t.call({
      method: 'POST',
      url: '/api/v1/webhook-endpoints',
      key: w.key,
      body: { url: 'https://93.184.215.14/hooks/comments', events: ['task.comment.created'] },
    });
    expect(endpoint.status, endpoint.text).toBe(201);
    statements.length = 0;
    const contents = ['one', 'two', 'three', 'four', 'five'];
    const made = await Promise.all(
      contents.map((content) => t.services.tasks.addComment(w.tenantId, w.task.id, { content }, caller)),
    );
    // The shared statements wrote nothing: each comment then went with its event, in its own transaction.
    expect(statements.map((s) => (s.commentIds as string[]).length)).toEqual([1, 4]);
    const events = await sql<{ payload: string }>`
      select payload from webhook_events where tenant_id = ${w.tenantId} and type = 'task.comment.created'`.execute(
      t.database.db,
    );
    expect(events.rows.map((e) => JSON.parse(e.payload).data.comment.id).sort()).toEqual(made.map((c) => c.id).sort());
    const listed = (await t.call({ url: `/api/v1/tasks/${w.task.id}/comments`, key: w.key })).body.data as {
      id: string;
    }[];
    expect(listed.map((c) => c.id).sort()).toEqual(made.map((c) => c.id).sort());
  });

  it('a shared statement whose answer was lost is not tried again: each of its comments fails as its own would have', async () => {
    const w = await workspace();
    statements.length = 0;
    loseSharedAnswers = true;
    try {
      const made = await Promise.allSettled(
        ['one', 'two', 'three', 'four'].map((content) =>
          t.services.tasks.addComment(w.tenantId, w.task.id, { content }, caller),
        ),
      );
      expect(made.map((m) => m.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected']);
      expect(String((made[1] as PromiseRejectedResult).reason)).toMatch(/Connection terminated/);
      // Tried once: a retry would have written them twice, or answered a conflict for a comment written.
      expect(statements.map((s) => (s.commentIds as string[]).length)).toEqual([1, 3]);
    } finally {
      loseSharedAnswers = false;
    }
  });

  it.skipIf(!usingPostgres)(
    'a statement waiting on a row lock holds up the comments behind it 100 ms at most, not until the lock goes',
    async () => {
      const w = await workspace();
      const other = (await t.call({ method: 'POST', url: '/api/v1/tasks', key: w.key, body: { title: 'Other' } })).body;
      // Another session holds the task's row: a comment on it waits for the lock (its foreign key).
      let unlock = () => {};
      const locked = new Promise<void>((resolve) => (unlock = resolve));
      let holding = () => {};
      const held = new Promise<void>((resolve) => (holding = resolve));
      const lock = t.database.db.transaction().execute(async (trx) => {
        await sql`select id from tasks where id = ${w.task.id} for update`.execute(trx);
        holding();
        await locked;
      });
      await held;
      try {
        const add = (ref: string, content: string) => t.services.tasks.addComment(w.tenantId, ref, { content }, caller);
        const blocked = [add(w.task.id, 'blocked 1'), add(w.task.id, 'blocked 2')];
        // Both sent (the second at the end of the turn), each waiting for the lock: the comments
        // made after them wait behind them.
        await new Promise<void>((resolve) => setImmediate(resolve));
        expect(statements.slice(-2).map((s) => (s.commentIds as string[]).length)).toEqual([1, 1]);
        const free = await Promise.all([add(other.id, 'free 1'), add(other.id, 'free 2')]);
        expect(free.map((c) => c.content)).toEqual(['free 1', 'free 2']);
        unlock();
        expect((await Promise.all(blocked)).map((c) => c.content)).toEqual(['blocked 1', 'blocked 2']);
      } finally {
        unlock();
        await lock;
      }
    },
  );

  it.skipIf(!usingPostgres)(
    "a user's permissions being changed hold back no comment that mentions the user",
    async () => {
      const w = await workspace();
      let unlock = () => {};
      const locked = new Promise<void>((resolve) => (unlock = resolve));
      let holding = () => {};
      const held = new Promise<void>((resolve) => (holding = resolve));
      // As a permission change holds the user until it commits.
      const change = t.database.db.transaction().execute(async (trx) => {
        await lockUser(trx, w.tenantId, w.grace.id);
        holding();
        await locked;
      });
      await held;
      try {
        const made = await t.services.tasks.addComment(
          w.tenantId,
          w.task.id,
          { content: 'while permissions change', mention_ids: [w.grace.id], author_id: w.ada.id },
          caller,
        );
        expect(made.mentions.map((m) => m.id)).toEqual([w.grace.id]);
      } finally {
        unlock();
        await change;
      }
    },
  );
});
