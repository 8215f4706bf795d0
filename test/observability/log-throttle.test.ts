// A repeating warning (src/lib/log-throttle.ts) is written once a minute per kind, the next line
// counting those left out.
import { describe, expect, it } from 'vitest';
import { throttledLine } from '../../src/lib/log-throttle.js';

describe('a throttled log line', () => {
  it('is written once per kind in the interval; the next one counts those left out', () => {
    const written: { fields: Record<string, unknown>; message: string }[] = [];
    let clock = 0;
    const line = throttledLine(
      (fields, message) => written.push({ fields, message }),
      60_000,
      () => clock,
    );
    line('rejected', { status: 500 }, 'down');
    line('rejected', { status: 500 }, 'down');
    line('timeout', {}, 'slow');
    clock = 59_999;
    line('rejected', { status: 503 }, 'down');
    expect(written).toEqual([
      { fields: { status: 500 }, message: 'down' },
      { fields: {}, message: 'slow' },
    ]);
    clock = 60_000;
    line('rejected', { status: 503 }, 'down');
    line('rejected', { status: 503 }, 'down');
    clock = 120_000;
    line('rejected', { status: 500 }, 'down');
    expect(written.slice(2)).toEqual([
      { fields: { status: 503, repeated: 2 }, message: 'down' },
      { fields: { status: 500, repeated: 1 }, message: 'down' },
    ]);
  });
});
