// A vector of numbers sent to SQL as a `real[]`: written as JSON and read back in its order, which
// works alike on PGlite and node-postgres (no driver-specific array encoding).
import { type RawBuilder, sql } from 'kysely';

/** A `real[]` expression holding `values`, in their order. */
export function realArray(values: number[]): RawBuilder<number[]> {
  return sql<number[]>`array(select x::real from jsonb_array_elements_text(${JSON.stringify(values)}::jsonb)
                                    with ordinality as a(x, i) order by i)`;
}
