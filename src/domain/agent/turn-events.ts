// The stream events of a turn (DESIGN.md §8): every event carries the turn's message and
// conversation ids, and a listener's failure never reaches the turn.
import type { TurnOptions } from './engine-types.js';
import type { Runtime } from './turn-runtime.js';
import type { TurnEvent, TurnItem } from './types.js';

export type EmitTurnEvent = (type: TurnEvent['type'], data?: Record<string, unknown>) => void;

export function turnEmitter(options: TurnOptions, messageId: string, conversationId: string): EmitTurnEvent {
  return (type, data = {}) => {
    try {
      options.onEvent?.({ type, data: { ...data, message_id: messageId, conversation_id: conversationId } });
    } catch {
      /* a broken listener must not break the turn */
    }
  };
}

/** A client function's result the turn now uses: traced and streamed as completed. */
export function useClientResult(rt: Runtime, item: Extract<TurnItem, { type: 'result' }>) {
  rt.trace.answered(item.call_id, 'completed', item.output);
  rt.emit('function_result', {
    call_id: item.call_id,
    name: item.name,
    status: 'completed',
    output: item.output,
  });
}
