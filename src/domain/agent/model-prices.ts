// Prices per model (MODEL_PRICES), for the cost of each provider call in a turn's trace:
// `{"gpt-4o-mini": {"input_per_1k": 0.00015, "output_per_1k": 0.0006}}`, in whatever currency the
// operator reads them in. A model without a price has no cost (null), never a guessed one.

export interface ModelPrice {
  input_per_1k: number;
  output_per_1k: number;
}

export type ModelPrices = Record<string, ModelPrice>;

const FIELDS = ['input_per_1k', 'output_per_1k'] as const;

/** Parses MODEL_PRICES; `fail` makes the error thrown for a value that is not a price list. */
export function parseModelPrices(raw: string | undefined, fail: (message: string) => Error): ModelPrices {
  if (raw === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw fail('MODEL_PRICES must be JSON, e.g. {"gpt-4o-mini":{"input_per_1k":0.00015,"output_per_1k":0.0006}}');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw fail('MODEL_PRICES must be a JSON object of model names to {input_per_1k, output_per_1k}');
  }
  const prices: ModelPrices = {};
  for (const [model, price] of Object.entries(parsed as Record<string, unknown>)) {
    const entry = price as Record<string, unknown> | null;
    for (const field of FIELDS) {
      const value = entry !== null && typeof entry === 'object' ? entry[field] : undefined;
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
        throw fail(`MODEL_PRICES.${model}.${field} must be a number of zero or more`);
      }
    }
    prices[model] = { input_per_1k: Number(entry?.input_per_1k), output_per_1k: Number(entry?.output_per_1k) };
  }
  return prices;
}

/** The cost of a call, rounded to 10 decimals; null when the model has no price or no usage was reported. */
export function costOf(
  prices: ModelPrices,
  model: string,
  inputTokens: number | null,
  outputTokens: number | null,
): number | null {
  const price = Object.hasOwn(prices, model) ? prices[model] : undefined;
  if (!price || inputTokens === null || outputTokens === null) return null;
  const cost = (inputTokens / 1000) * price.input_per_1k + (outputTokens / 1000) * price.output_per_1k;
  return Math.round(cost * 1e10) / 1e10;
}
