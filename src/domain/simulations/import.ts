// A test case built from a real conversation (DESIGN.md §7, "import from thread"; the thread is a
// conversation id). What the conversation holds becomes the case:
// - the first customer message → `question`; later customer messages → `steps`;
// - the agent's turns decide `expected_type`, in this order: a handoff → `handoff` (the agent it
//   went to); a tool call → `tool_call` (the first call's name and arguments; the outputs of every
//   call become `tool_call_overrides`, so replaying the case does not run the tools again);
//   a declined final answer (the built-in "don't know" text, or a knowledge gap recorded for the
//   message it answers) →
//   `no_answer`; otherwise → `answer`, with the agent's final answer as `expected_answer`.
// Personal data in the imported text is replaced with placeholders unless `redact_pii` is false
// (./pii.ts), and `metadata.source_conversation_id` traces the case back to the conversation.

import type { Db, SimulationExpectedType } from '../../db/index.js';
import { cutText } from '../../lib/text.js';
import { UNKNOWN_ANSWER } from '../agent/builtin-provider.js';
import { isCustomerConversation } from '../conversations/conversations.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { requireDataset } from './datasets.js';
import { redactText, redactValue } from './pii.js';
import { TEST_CASE_LIMITS, type TestCaseRecord } from './records.js';
import type { NewTestCase } from './test-case-rules.js';
import { createTestCase } from './test-cases.js';

/** Messages read from a conversation; a longer one is cut (its first messages are the case). */
const MAX_MESSAGES = 200;

export interface ImportOptions {
  redact_pii?: boolean | undefined;
  persona_id?: string | undefined;
}

/** The conversation's language and its first messages; 404 unless it is a customer's. */
async function readConversation(db: Db, tenantId: string, conversationId: string) {
  const conversation = await db
    .selectFrom('conversations')
    .select(['id', 'language'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', conversationId)
    // A customer's: a simulated conversation is not there to import (it goes when its case ends).
    .where(isCustomerConversation(tenantId, 'id'))
    .executeTakeFirst();
  if (!conversation) throw new NotFoundError('conversation', conversationId);
  const messages = await db
    .selectFrom('messages')
    .select(['id', 'author', 'hidden', 'content', 'status', 'handoff', 'in_reply_to'])
    .where('tenant_id', '=', tenantId)
    .where('conversation_id', '=', conversationId)
    .orderBy('id')
    .limit(MAX_MESSAGES)
    .execute();
  return { language: conversation.language, messages };
}

type ConversationMessage = Awaited<ReturnType<typeof readConversation>>['messages'][number];

/** What the agent's turns expect of the case (see the module comment). */
async function expectationOf(db: Db, tenantId: string, messages: ConversationMessage[]) {
  const agentMessages = messages.filter((m) => m.author === 'agent');
  const agentIds = agentMessages.map((m) => m.id);
  const calls =
    agentIds.length === 0
      ? []
      : await db
          .selectFrom('function_calls')
          .select(['message_id', 'name', 'arguments', 'status', 'output'])
          .where('tenant_id', '=', tenantId)
          .where('message_id', 'in', agentIds)
          .orderBy('message_id')
          .orderBy('position')
          .execute();
  const handoff = agentMessages.find((m) => m.handoff !== null)?.handoff ?? null;
  const answered = agentMessages.filter((m) => m.status === 'COMPLETED' && m.content.trim() !== '');
  const final = answered[answered.length - 1];
  const finalAnswer = final?.content ?? null;
  const firstCall = calls[0];
  // The final answer declined when it is the built-in "don't know" text or a knowledge gap was
  // recorded for the message it answers.
  const gap =
    final?.in_reply_to == null
      ? undefined
      : await db
          .selectFrom('knowledge_update_requests')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('message_id', '=', final.in_reply_to)
          .executeTakeFirst();

  let expectedType: SimulationExpectedType;
  if (handoff) expectedType = 'handoff';
  else if (firstCall) expectedType = 'tool_call';
  else if (gap !== undefined || finalAnswer === null || finalAnswer === UNKNOWN_ANSWER) expectedType = 'no_answer';
  else expectedType = 'answer';

  const toolCallOverrides: Record<string, unknown> = {};
  for (const call of calls) {
    if (call.status === 'completed' && !Object.hasOwn(toolCallOverrides, call.name)) {
      toolCallOverrides[call.name] = call.output ?? null;
    }
  }
  return { expectedType, finalAnswer, firstCall, handoff, toolCallOverrides };
}

export async function testCaseFromConversation(
  db: Db,
  tenantId: string,
  conversationId: string,
  options: ImportOptions,
): Promise<NewTestCase> {
  const { language, messages } = await readConversation(db, tenantId, conversationId);
  const customer = messages.filter((m) => m.author === 'customer' && !m.hidden && m.content.trim() !== '');
  const first = customer[0];
  if (!first) {
    throw new ConflictError('This conversation has no customer message to build a test case from.');
  }
  const { expectedType, finalAnswer, firstCall, handoff, toolCallOverrides } = await expectationOf(
    db,
    tenantId,
    messages,
  );

  const redact = options.redact_pii !== false;
  // A test case's bounds hold for an imported one too: a longer message is cut (at a code point),
  // later customer messages past the step limit are left out, and metadata says so.
  const laterMessages = customer.slice(1);
  let truncated = laterMessages.length > TEST_CASE_LIMITS.steps;
  const cut = (value: string, max: number) => {
    const kept = cutText(value, max);
    if (kept !== value) truncated = true;
    return kept;
  };
  const text = (value: string, max: number = TEST_CASE_LIMITS.text) => cut(redact ? redactText(value) : value, max);
  const value = <T>(v: T) => (redact ? redactValue(v) : v);
  return {
    question: text(first.content),
    expected_type: expectedType,
    expected_answer:
      finalAnswer === null || expectedType === 'no_answer' ? null : text(finalAnswer, TEST_CASE_LIMITS.answer),
    expected_tool_name: firstCall?.name ?? null,
    expected_tool_args: firstCall ? value(firstCall.arguments) : {},
    expected_agent_id: handoff?.agent_id ?? null,
    persona_id: options.persona_id,
    tool_call_overrides: value(toolCallOverrides),
    steps: laterMessages.slice(0, TEST_CASE_LIMITS.steps).map((m) => ({ content: text(m.content) })),
    // Last, so that it sees every cut made above.
    metadata: {
      source_conversation_id: conversationId,
      pii_redacted: redact,
      ...(language ? { language } : {}),
      ...(truncated ? { truncated: true } : {}),
    },
  };
}

/** Builds a test case from a conversation and adds it to the dataset. */
export async function importConversation(
  db: Db,
  tenantId: string,
  datasetId: string,
  conversationId: string,
  options: ImportOptions,
): Promise<TestCaseRecord> {
  await requireDataset(db, tenantId, datasetId);
  const input = await testCaseFromConversation(db, tenantId, conversationId, options);
  return createTestCase(db, tenantId, datasetId, input);
}
