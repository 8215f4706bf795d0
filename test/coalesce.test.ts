// Point reads coalesced (src/db/coalesce.ts): a read goes at once while its group has room, and the
// reads that arrive while its statements run wait and go as one statement.
import { describe, expect, it } from 'vitest';
import { coalescePointReads } from '../src/db/coalesce.js';

type Row = { key: string; group: string };

/**
 * A coalescer over an in-memory table per group. Every statement it is asked is recorded, and
 * answers only when `answer()` is called (then, and later ones at once), so that reads can be made
 * while statements run.
 */
function reader(
  tables: Record<string, string[]>,
  options: { maxInFlight?: number; maxKeys?: number; fail?: (group: string) => Error | undefined } = {},
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
    maxKeys: options.maxKeys ?? 100,
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

  it('sends up to maxInFlight statements of a group at once, and the reads beyond them as one statement when one returns', async () => {
    const { reads, queries, answer } = reader({ a: ['1', '2', '3', '4'], b: ['1'] }, { maxInFlight: 2 });
    const answers = Promise.all([
      reads.read('a', '1'),
      reads.read('a', '2'),
      reads.read('a', '3'),
      reads.read('b', '1'),
      reads.read('a', 'missing'),
      reads.read('a', '4'),
    ]);
    // Group b has its own room; a's third and later reads wait.
    expect(queries).toEqual([
      { group: 'a', keys: ['1'] },
      { group: 'a', keys: ['2'] },
      { group: 'b', keys: ['1'] },
    ]);
    answer();
    expect(await answers).toEqual([
      { key: '1', group: 'a' },
      { key: '2', group: 'a' },
      { key: '3', group: 'a' },
      { key: '1', group: 'b' },
      undefined,
      { key: '4', group: 'a' },
    ]);
    expect(queries.slice(3)).toEqual([{ group: 'a', keys: ['3', 'missing', '4'] }]);
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

  it('puts at most maxKeys keys in a statement, and sends the waiting statements in turn', async () => {
    const { reads, queries, answer } = reader({ a: ['1', '2', '3', '4', '5', '6'] }, { maxKeys: 2 });
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
