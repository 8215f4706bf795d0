// The sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG): a trace's first span draws by
// ratio, a child follows a caller's sampled flag (parent-based), and a child of this process's
// span is always recorded.
import { type SpanContext, TraceFlags } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { samplerFromEnv } from '../../src/observability/sampler.js';

const caller = (sampled: boolean, traceId = '4bf92f3577b34da6a3ce929d0e0e4736'): SpanContext => ({
  traceId,
  spanId: '00f067aa0ba902b7',
  traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
  isRemote: true,
});
const local: SpanContext = { ...caller(true), isRemote: false };

/** The share of `n` first spans recorded. */
const share = (sample: (parent: SpanContext | undefined) => boolean, n = 20_000) =>
  Array.from({ length: n }, () => sample(undefined)).filter(Boolean).length / n;

describe('the sampler', () => {
  it('records every trace by default, and follows a caller that left its trace out', () => {
    const sample = samplerFromEnv({});
    expect(sample(undefined)).toBe(true);
    expect(sample(caller(true))).toBe(true);
    expect(sample(caller(false))).toBe(false);
  });

  it('parentbased_traceidratio draws first spans by ratio and follows callers', () => {
    const sample = samplerFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' });
    expect(share(sample)).toBeGreaterThan(0.07);
    expect(share(sample)).toBeLessThan(0.13);
    expect(sample(caller(true))).toBe(true);
    expect(sample(caller(false))).toBe(false);
    expect(sample(local)).toBe(true);
  });

  it('always_off records nothing of its own; traceidratio decides a caller’s trace by its id', () => {
    expect(share(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'always_off' }))).toBe(0);
    const sample = samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' });
    // The draw is the trace id's last 8 hex digits over 2^32, whatever the caller's flag.
    expect(sample(caller(false, `${'0'.repeat(24)}00000001`))).toBe(true);
    expect(sample(caller(true, `${'0'.repeat(24)}ffffffff`))).toBe(false);
  });
});
