// Work coalesced (src/db/coalesce.ts): an item goes at once while none of its group's statements
// runs, at the end of the turn with the turn's others while fewer than maxInFlight run, and the
// items that arrive while maxInFlight run wait and go as one statement.
import { describe, expect, it } from 'vitest';
import { type CoalesceOptions, coalesce, coalescePointReads, type Outcome } from '../../src/db/coalesce.js';

type Row = { key: string; group: string };

/** The end of the event loop's turn: after the immediates scheduled before it. */
const turnEnd = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A coalescer over an in-memory table per group. Every statement it is asked is recorded, and
 * answers only when `answer()` is called (then, and later ones at once), so that reads can be made
 * while statements run.
 */
function reader(
  tables: Record<string, string[]>,
  options: { maxInFlight?: number; maxItems?: number; fail?: (group: string) => Error | undefined } = {},
) {
  const queries: { group: string; keys: string[] }[] = [];
  let held: (() => void)[] | undefined = [];
  const reads = coalescePointReads<Row>({
    async readMany(group, keys) {
      queries.push({ group, keys });
      if (held) await new Promise<void>((resolve) => held?.push(resolve));
      const error = options.fail?.(group);
      if (error) throw error;
      return (tables[group] ?? []).filter((key) => keys.includes(key)).map((key) => ({ key, group }));
    },
    keyOf: (row) => row.key,
    maxInFlight: options.maxInFlight ?? 1,
    maxItems: options.maxItems ?? 100,
  });
  const answer = () => {
    const waiting = held ?? [];
    held = undefined;
    for (const release of waiting) release();
  };
  return { reads, queries, answer };
}

describe('coalesced point reads', () => {
  it('sends a lone read at once, in a statement of its own', async () => {
    const { reads, queries, answer } = reader({ a: ['1'] });
    const read = reads.read('a', '1');
    expect(queries).toEqual([{ group: 'a', keys: ['1'] }]);
    answer();
    expect(await read).toEqual({ key: '1', group: 'a' });
  });

  it('sends a read at once while none of its group runs, the others of its turn as one statement when the turn ends, and the reads beyond maxInFlight when one returns', async () => {
    const { reads, queries, answer } = reader({ a: ['1', '2', '3', '4'], b: ['1'] }, { maxInFlight: 2 });
    const first = [reads.read('a', '1'), reads.read('a', '2'), reads.read('b', '1'), reads.read('a', 'missing')];
    // Group b has its own room; a's reads after its first wait for the end of the turn.
    expect(queries).toEqual([
      { group: 'a', keys: ['1'] },
      { group: 'b', keys: ['1'] },
    ]);
    await turnEnd();
    expect(queries.slice(2)).toEqual([{ group: 'a', keys: ['2', 'missing'] }]);
    // Two of a's statements run: the reads after them wait for one to return, whatever the turn.
    const later = [reads.read('a', '3'), reads.read('a', '4')];
    await turnEnd();
    expect(queries).toHaveLength(3);
    answer();
    expect(await Promise.all([...first, ...later])).toEqual([
      { key: '1', group: 'a' },
      { key: '2', group: 'a' },
      { key: '1', group: 'b' },
      undefined,
      { key: '3', group: 'a' },
      { key: '4', group: 'a' },
    ]);
    expect(queries.slice(3)).toEqual([{ group: 'a', keys: ['3', '4'] }]);
  });

  it('sends the reads held for the end of the turn once, when a statement returns before it ends', async () => {
    const { reads, queries, answer } = reader({ a: ['1', '2'] }, { maxInFlight: 2 });
    const one = reads.read('a', '1');
    const two = reads.read('a', '2');
    answer();
    expect(await one).toEqual({ key: '1', group: 'a' });
    // The first statement's end sent the held read, before the turn ended.
    expect(queries.map((query) => query.keys)).toEqual([['1'], ['2']]);
    await turnEnd();
    expect(await two).toEqual({ key: '2', group: 'a' });
    expect(queries.map((query) => query.keys)).toEqual([['1'], ['2']]);
  });

  it('asks a key read twice while it waits once, and answers both reads', async () => {
    const { reads, queries, answer } = reader({ a: ['1', '2'] });
    const answers = Promise.all([reads.read('a', '1'), reads.read('a', '2'), reads.read('a', '2')]);
    answer();
    expect(await answers).toEqual([
      { key: '1', group: 'a' },
      { key: '2', group: 'a' },
      { key: '2', group: 'a' },
    ]);
    expect(queries.map((query) => query.keys)).toEqual([['1'], ['2']]);
  });

  it('puts at most maxItems reads in a statement, and sends the waiting statements in turn', async () => {
    const { reads, queries, answer } = reader({ a: ['1', '2', '3', '4', '5', '6'] }, { maxItems: 2 });
    const answers = Promise.all(['1', '2', '3', '4', '5', '6'].map((key) => reads.read('a', key)));
    answer();
    expect((await answers).map((row) => row?.key)).toEqual(['1', '2', '3', '4', '5', '6']);
    expect(queries.map((query) => query.keys)).toEqual([['1'], ['2', '3'], ['4', '5'], ['6']]);
  });

  it("fails every read of a statement that fails with that statement's error, a key read twice included, and no read of another group", async () => {
    const broken = new Error('relation does not exist');
    const { reads, queries, answer } = reader(
      { a: ['1'], b: ['1'] },
      { fail: (group) => (group === 'a' ? broken : undefined) },
    );
    const answers = Promise.allSettled([
      reads.read('a', '0'),
      reads.read('a', '1'),
      reads.read('a', '1'),
      reads.read('b', '1'),
    ]);
    answer();
    expect(await answers).toEqual([
      { status: 'rejected', reason: broken },
      { status: 'rejected', reason: broken },
      { status: 'rejected', reason: broken },
      { status: 'fulfilled', value: { key: '1', group: 'b' } },
    ]);
    // A failed statement leaves room for the next: the group still reads.
    expect(queries.map((query) => query.keys)).toEqual([['0'], ['1'], ['1']]);
    await expect(reads.read('b', '1')).resolves.toEqual({ key: '1', group: 'b' });
  });
});

describe('coalesced items with outcomes of their own', () => {
  /** Items that are numbers; a statement settles each, failing the odd ones when `oddFail` is set. */
  function runner(oddFail: boolean) {
    const statements: number[][] = [];
    let held: (() => void)[] | undefined = [];
    const items = coalesce<number, number>({
      maxInFlight: 1,
      maxItems: 10,
      async runMany(_group, batch) {
        statements.push(batch);
        if (held) await new Promise<void>((resolve) => held?.push(resolve));
        return batch.map(
          (n): Outcome<number> =>
            oddFail && n % 2 === 1 ? { ok: false, error: new Error(`odd ${n}`) } : { ok: true, value: n * 10 },
        );
      },
    });
    const answer = () => {
      const waiting = held ?? [];
      held = undefined;
      for (const release of waiting) release();
    };
    return { items, statements, answer };
  }

  it('settles each item of a batch as its statement said: one failing fails no other', async () => {
    const { items, statements, answer } = runner(true);
    const outcomes = Promise.allSettled([1, 2, 3, 4].map((n) => items.run('g', n)));
    answer();
    expect(await outcomes).toEqual([
      { status: 'rejected', reason: new Error('odd 1') },
      { status: 'fulfilled', value: 20 },
      { status: 'rejected', reason: new Error('odd 3') },
      { status: 'fulfilled', value: 40 },
    ]);
    expect(statements).toEqual([[1], [2, 3, 4]]);
  });

  it('does not coalesce the same item twice: each run is its own item', async () => {
    const { items, statements, answer } = runner(false);
    const outcomes = Promise.all([1, 2, 2].map((n) => items.run('g', n)));
    answer();
    expect(await outcomes).toEqual([10, 20, 20]);
    expect(statements).toEqual([[1], [2, 2]]);
  });

  it('fails the items a statement left unanswered', async () => {
    const items = coalesce<number, number>({
      maxInFlight: 1,
      maxItems: 10,
      runMany: async (_group, batch) => batch.slice(1).map((n) => ({ ok: true, value: n })),
    });
    await expect(items.run('g', 1)).rejects.toThrow('fewer items than asked');
  });
});

/** Items answered as themselves, each statement recorded and held while `hold` says. */
function echoing(options: CoalesceOptions, hold: (batch: number[]) => Promise<void> | undefined) {
  const statements: number[][] = [];
  const items = coalesce<number, number>({
    ...options,
    async runMany(_group, batch) {
      statements.push(batch);
      await hold(batch);
      return batch.map((n) => ({ ok: true, value: n }));
    },
  });
  return { items, statements };
}

describe('a batch that waits too long', () => {
  it('is sent beside the running statements after maxWaitMs, up to twice maxInFlight, and the rest wait for room', async () => {
    const holds: (() => void)[] = [];
    const { items, statements } = echoing({ maxInFlight: 1, maxItems: 2, maxWaitMs: 20 }, (batch) =>
      batch.includes(1) || batch.includes(2) ? new Promise<void>((resolve) => holds.push(resolve)) : undefined,
    );
    // 1 runs and is held; 2 and 3 wait together, 4 behind them.
    const one = items.run('g', 1);
    const later = [2, 3, 4].map((n) => items.run('g', n));
    expect(statements).toEqual([[1]]);
    await new Promise((resolve) => setTimeout(resolve, 60));
    // [2, 3] went after 20 ms, beside [1] (two running: twice maxInFlight), and is held too; [4]
    // found no room and waits.
    expect(statements).toEqual([[1], [2, 3]]);
    for (const release of holds.splice(0)) release();
    expect(await one).toBe(1);
    expect(await Promise.all(later)).toEqual([2, 3, 4]);
    expect(statements).toEqual([[1], [2, 3], [4]]);
  });

  it('is not sent early when its turn comes first', async () => {
    const { items, statements } = echoing(
      { maxInFlight: 1, maxItems: 10, maxWaitMs: 1_000 },
      () => new Promise<void>((resolve) => setTimeout(resolve, 5)),
    );
    expect(await Promise.all([1, 2, 3].map((n) => items.run('g', n)))).toEqual([1, 2, 3]);
    expect(statements).toEqual([[1], [2, 3]]);
  });
});

describe('a batch whose maxWaitMs passed while twice maxInFlight ran', () => {
  it('goes first when room under the cap comes back, not after a newer batch', async () => {
    const statements: number[][] = [];
    const holds = new Map<number, () => void>();
    const items = coalesce<number, number>({
      maxInFlight: 1,
      maxItems: 1,
      maxWaitMs: 20,
      async runMany(_group, batch) {
        statements.push(batch);
        const n = batch[0] as number;
        if (n <= 2) await new Promise<void>((resolve) => holds.set(n, resolve));
        return batch.map((value) => ({ ok: true, value }));
      },
    });
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const one = items.run('g', 1); // runs, held (a statement waiting on a lock)
    const two = items.run('g', 2); // waits; sent after 20 ms beside [1]: the cap (2) is reached
    await sleep(30);
    expect(statements).toEqual([[1], [2]]);
    const three = items.run('g', 3); // waits; its 20 ms pass while the cap is reached
    await sleep(30);
    expect(statements).toEqual([[1], [2]]);
    holds.get(2)?.();
    expect(await two).toBe(2);
    // One runs, under the cap: [3] has waited past maxWaitMs and should go now.
    await sleep(5);
    const four = items.run('g', 4);
    await sleep(30);
    expect(statements.slice(2)).toEqual([[3], [4]]);
    holds.get(1)?.();
    expect(await Promise.all([one, three, four])).toEqual([1, 3, 4]);
  });
});
