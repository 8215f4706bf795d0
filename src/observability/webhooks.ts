// Webhook delivery attempts in the metrics (outcome and duration) and in a client span of their
// own, a child of the delivery job's span.
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { recordWebhookDelivery, type WebhookOutcome } from './metrics.js';
import { withSpan } from './tracing.js';

/** Runs a delivery attempt (`send`), then counts and times it by outcome; a throw (the job stopping) is not counted. */
export async function observeWebhookAttempt<T extends { ok: boolean; statusCode: number | null }>(
  attributes: { endpointId: string; deliveryId: string },
  send: () => Promise<T>,
): Promise<T> {
  const started = performance.now();
  const outcome = await withSpan(
    'webhook delivery',
    { 'workspace.webhook_endpoint_id': attributes.endpointId, 'workspace.webhook_delivery_id': attributes.deliveryId },
    async (span) => {
      const answer = await send();
      if (answer.statusCode !== null) span?.setAttribute('http.response.status_code', answer.statusCode);
      if (!answer.ok) span?.setStatus({ code: SpanStatusCode.ERROR });
      return answer;
    },
    { kind: SpanKind.CLIENT },
  );
  const label: WebhookOutcome = outcome.ok
    ? 'succeeded'
    : outcome.statusCode === null
      ? 'failed_connection'
      : 'failed_status';
  recordWebhookDelivery(label, (performance.now() - started) / 1000);
  return outcome;
}
