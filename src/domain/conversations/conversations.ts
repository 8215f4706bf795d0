// Conversations and their messages as clients read them (DESIGN.md §7), and message feedback.
// The turn engine (src/domain/agent/engine.ts) writes them; this area owns their records
// (./conversation-records.ts, ./messages.ts, ./feedback.ts), and the rule that tells a
// customer's conversation from one a simulation case is playing (./customer-scope.ts).
import type { Db } from '../../db/index.js';
import type { Page } from '../pagination.js';
import { type ConversationPage, findConversation, getConversation, listConversations } from './conversation-records.js';
import { createFeedback, type NewFeedback } from './feedback.js';
import { findMessage, functionCalls, getMessage, listMessages, turnMessage } from './messages.js';

export {
  type ConversationRecord,
  type ConversationRow,
  toConversationRecord,
} from './conversation-records.js';
export { isCustomerConversation } from './customer-scope.js';
export type { FeedbackRecord } from './feedback.js';
export {
  type CitationRecord,
  type FunctionCallRecord,
  type MessageRecord,
  type MessageRow,
  type MessageStatus,
  toMessageRecord,
} from './messages.js';

export function createConversationService({ db }: { db: Db }) {
  return {
    findMessage: (tenantId: string, messageId: string, options?: { simulated?: boolean }) =>
      findMessage(db, tenantId, messageId, options),
    getMessage: (tenantId: string, messageId: string) => getMessage(db, tenantId, messageId),
    findConversation: (tenantId: string, conversationId: string) => findConversation(db, tenantId, conversationId),
    turnMessage: (tenantId: string, messageId: string) => turnMessage(db, tenantId, messageId),
    getConversation: (tenantId: string, conversationId: string) => getConversation(db, tenantId, conversationId),
    listConversations: (tenantId: string, page: ConversationPage) => listConversations(db, tenantId, page),
    listMessages: (tenantId: string, conversationId: string, page: Page) =>
      listMessages(db, tenantId, conversationId, page),
    functionCalls: (tenantId: string, messageIds: string[]) => functionCalls(db, tenantId, messageIds),
    createFeedback: (tenantId: string, messageId: string, input: NewFeedback) =>
      createFeedback(db, tenantId, messageId, input),
  };
}

export type ConversationService = ReturnType<typeof createConversationService>;
