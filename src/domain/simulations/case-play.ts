// Playing one test case against the agent: its question, then each step, in one conversation of
// the run's turn engine, with the case's overrides answering for the tools. What the agent did
// over the whole case is gathered into its outcome, which the verdict judges (./evaluation.ts).

import type { Db } from '../../db/index.js';
import type { AgentEngine } from '../agent/engine.js';
import { DomainError } from '../errors.js';
import type { ClaimedCase } from './case-results.js';
import type { DeclinedTracker } from './declined.js';
import type { CaseOutcome } from './evaluation.js';
import type { TestCaseRecord } from './records.js';

/** Names a client function may take (the conversations API's rule). */
const CLIENT_FUNCTION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

type AgentMessage = Awaited<ReturnType<AgentEngine['runTurn']>>;

export interface CasePlayDeps {
  db: Db;
  /** The run job's own engine (see ./runs.ts). */
  engine: AgentEngine;
  declined: DeclinedTracker;
}

async function enabledWorkflows(db: Db, tenantId: string): Promise<Set<string>> {
  const rows = await db
    .selectFrom('workflows')
    .select('name')
    .where('tenant_id', '=', tenantId)
    .where('enabled', '=', true)
    .execute();
  return new Set(rows.map((r) => r.name));
}

/**
 * The case's overrides, and the client functions lent to the agent for its turns: the overridden
 * names that are not enabled workflows, so a case can exercise an application's functions.
 */
async function caseTools(db: Db, tenantId: string, testCase: TestCaseRecord) {
  const overrides = { ...testCase.api_data_overrides, ...testCase.tool_call_overrides };
  const workflows = Object.keys(overrides).length === 0 ? new Set<string>() : await enabledWorkflows(db, tenantId);
  const clientFunctions = Object.keys(overrides)
    .filter((name) => !workflows.has(name) && CLIENT_FUNCTION_NAME.test(name))
    .map((name) => ({ name, description: 'A function of the application, answered by the test case overrides.' }));
  return { overrides, clientFunctions };
}

/** Adds an agent turn to the outcome: its answer and status, tool calls, handoff and citations. */
function addTurn(outcome: CaseOutcome, message: AgentMessage, declined: DeclinedTracker) {
  outcome.turns += 1;
  outcome.transcript.push({
    author: 'agent',
    content: message.content,
    status: message.status,
    message_id: message.id,
  });
  outcome.answer = message.content;
  outcome.turn_status = message.status;
  outcome.error = message.error;
  outcome.declined = declined.take(message.in_reply_to);
  for (const call of message.function_calls) {
    outcome.tool_calls.push({
      name: call.name,
      type: call.type,
      arguments: call.arguments,
      status: call.status,
      output: call.output,
    });
  }
  if (message.handoff) outcome.handoff = { agent_id: message.handoff.agent_id, agent_name: message.handoff.agent_name };
  for (const c of message.citations) {
    if (!outcome.citations.some((known) => known.document_id === c.document_id)) {
      outcome.citations.push({ document_id: c.document_id, title: c.title });
    }
  }
}

/**
 * Plays a case (see the module comment). The case's conversation is noted on its result row as
 * soon as it exists, so a replay of the case can delete it.
 */
export async function playCase(
  { db, engine, declined }: CasePlayDeps,
  claimed: ClaimedCase,
  agentId: string,
  testCase: TestCaseRecord,
): Promise<{ outcome: CaseOutcome; conversationId: string | undefined }> {
  const { tenantId } = claimed;
  const { overrides, clientFunctions } = await caseTools(db, tenantId, testCase);
  const language = typeof testCase.metadata.language === 'string' ? testCase.metadata.language : undefined;
  const outcome: CaseOutcome = {
    answer: '',
    turn_status: 'COMPLETED',
    error: null,
    tool_calls: [],
    handoff: null,
    declined: false,
    citations: [],
    turns: 0,
    transcript: [],
  };
  let conversationId: string | undefined;
  for (const content of [testCase.question, ...testCase.steps.map((s) => s.content)]) {
    let message: AgentMessage;
    outcome.transcript.push({ author: 'customer', content, status: null });
    try {
      const turn = await engine.sendMessage(
        tenantId,
        {
          content,
          client_functions: clientFunctions,
          client_functions_mode: 'wait',
          ...(conversationId ? { conversation_id: conversationId } : { agent_id: agentId }),
          ...(language && !conversationId ? { language } : {}),
        },
        {
          toolOverrides: overrides,
          // Marked as the run's in the conversation's own transaction: question extraction and
          // coverage never see it as a customer's, not even while its first turn plays.
          onConversationCreated: async (trx, id) => {
            await trx
              .insertInto('simulation_conversations')
              .values({ conversation_id: id, tenant_id: tenantId, run_id: claimed.runId, test_case_id: testCase.id })
              .execute();
          },
        },
      );
      if (!conversationId) {
        conversationId = turn.conversationId;
        await db
          .updateTable('simulation_results')
          .set({ conversation_id: conversationId })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', claimed.resultId)
          .where('attempt', '=', claimed.attempt)
          .execute();
      }
      message = await turn.finished;
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      outcome.turn_status = 'FAILED';
      outcome.error = { code: error.code, message: error.message };
      break;
    }
    addTurn(outcome, message, declined);
    if (message.status !== 'COMPLETED') break;
  }
  return { outcome, conversationId };
}
