// Which traces are kept, from OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (the standard
// names and meanings), decided when a trace's first span would start: a trace left out makes no
// span, no id and no context at all.
import { type SpanContext, TraceFlags } from '@opentelemetry/api';

/** Whether a span under `parent` (undefined: a trace's first span) is recorded. */
export type Sampler = (parent: SpanContext | undefined) => boolean;

/** A deterministic draw in [0, 1) from a trace id, so every service sampling a trace by ratio agrees. */
function traceIdDraw(traceId: string): number {
  return Number.parseInt(traceId.slice(-8), 16) / 0x1_0000_0000;
}

function ratioOf(arg: string | undefined): number {
  const ratio = Number(arg ?? 1);
  return Number.isFinite(ratio) ? Math.min(Math.max(ratio, 0), 1) : 1;
}

/**
 * The sampler the environment names (`parentbased_always_on` by default). Parent-based: a child
 * follows its parent's sampled flag; a first span draws by ratio. A span whose parent is one of
 * this process's spans is always recorded (its parent was).
 */
export function samplerFromEnv(env: NodeJS.ProcessEnv): Sampler {
  const name = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase() || 'parentbased_always_on';
  const ratio = name.endsWith('traceidratio') ? ratioOf(env.OTEL_TRACES_SAMPLER_ARG) : 1;
  const first: () => boolean = name.endsWith('always_off')
    ? () => false
    : ratio >= 1
      ? () => true
      : () => Math.random() < ratio;
  const parentBased = name.startsWith('parentbased_') || !['always_on', 'always_off', 'traceidratio'].includes(name);
  return (parent) => {
    if (parent === undefined) return first();
    if (!parent.isRemote) return true;
    if (parentBased) return (parent.traceFlags & TraceFlags.SAMPLED) !== 0;
    return name === 'traceidratio' ? traceIdDraw(parent.traceId) < ratio : first();
  };
}
