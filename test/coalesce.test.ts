// Point reads coalesced (src/db/coalesce.ts): the reads of one turn become one query per group.
import { describe, expect, it } from 'vitest';
import { coalescePointReads } from '../src/db/coalesce.js';

type Row = { key: string; group: string };

/** A coalescer over an in-memory table per group, recording every query it is asked. */
function reader(tables: Record<string, string[]>, maxKeys = 100, fail?: (group: string) => Error | undefined) {
  const queries: { group: string; keys: string[] }[] = [];
  const reads = coalescePointReads<Row>({
    async readMany(group, keys) {
      queries.push({ group, keys });
      const error = fail?.(group);
      if (error) throw error;
      return (tables[group] ?? []).filter((key) => keys.includes(key)).map((key) => ({ key, group }));
    },
    keyOf: (row) => row.key,
    maxKeys,
  });
  return { reads, queries };
}

describe('coalesced point reads', () => {
  it('asks one query per group for the reads of one turn, each read getting its own row or undefined', async () => {
    const { reads, queries } = reader({ a: ['1', '2', '3'], b: ['1'] });
    const answers = await Promise.all([
      reads.read('a', '1'),
      reads.read('a', '2'),
      reads.read('b', '1'),
      reads.read('a', 'missing'),
      reads.read('b', '2'),
    ]);
    expect(answers).toEqual([
      { key: '1', group: 'a' },
      { key: '2', group: 'a' },
      { key: '1', group: 'b' },
      undefined,
      undefined,
    ]);
    expect(queries).toEqual([
      { group: 'a', keys: ['1', '2', 'missing'] },
      { group: 'b', keys: ['1', '2'] },
    ]);
  });

  it('asks a key read twice in one turn once, and answers both reads', async () => {
    const { reads, queries } = reader({ a: ['1'] });
    const answers = await Promise.all([reads.read('a', '1'), reads.read('a', '1')]);
    expect(answers).toEqual([
      { key: '1', group: 'a' },
      { key: '1', group: 'a' },
    ]);
    expect(queries).toEqual([{ group: 'a', keys: ['1'] }]);
  });

  it('sends reads of a later turn in a query of their own', async () => {
    const { reads, queries } = reader({ a: ['1', '2'] });
    const first = reads.read('a', '1');
    await new Promise((resolve) => setImmediate(resolve));
    const second = reads.read('a', '2');
    expect(await Promise.all([first, second])).toEqual([
      { key: '1', group: 'a' },
      { key: '2', group: 'a' },
    ]);
    expect(queries).toEqual([
      { group: 'a', keys: ['1'] },
      { group: 'a', keys: ['2'] },
    ]);
  });

  it('sends a batch that reaches maxKeys at once, and the rest of the turn in the next query', async () => {
    const { reads, queries } = reader({ a: ['1', '2', '3', '4', '5'] }, 2);
    const answers = await Promise.all(['1', '2', '3', '4', '5'].map((key) => reads.read('a', key)));
    expect(answers.map((row) => row?.key)).toEqual(['1', '2', '3', '4', '5']);
    expect(queries.map((query) => query.keys)).toEqual([['1', '2'], ['3', '4'], ['5']]);
  });

  it("fails every read of a query that fails with that query's error, and no read of another group", async () => {
    const broken = new Error('relation does not exist');
    const { reads } = reader({ a: ['1'], b: ['1'] }, 100, (group) => (group === 'a' ? broken : undefined));
    const answers = await Promise.allSettled([reads.read('a', '1'), reads.read('a', '2'), reads.read('b', '1')]);
    expect(answers).toEqual([
      { status: 'rejected', reason: broken },
      { status: 'rejected', reason: broken },
      { status: 'fulfilled', value: { key: '1', group: 'b' } },
    ]);
  });
});
