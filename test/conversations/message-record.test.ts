// The message record as read back from a stored row: a citation stored before citations carried
// their link (`url`) reads with `url: null`, the shape every citation has.
import { describe, expect, it } from 'vitest';
import { type MessageRow, toMessageRecord } from '../../src/domain/conversations/messages.js';

const row = (citations: unknown[]): MessageRow => ({
  id: 'm1',
  tenant_id: 't1',
  conversation_id: 'c1',
  agent_id: null,
  role: 'assistant',
  author: 'agent',
  hidden: false,
  content: 'Refunds are paid within five days.',
  status: 'COMPLETED',
  citations,
  handoff: null,
  error: null,
  in_reply_to: null,
  created_at: new Date('2026-11-28T09:00:00Z'),
  updated_at: new Date('2026-11-28T09:00:00Z'),
});

const stored = { document_id: 'd1', title: 'Refund policy', source_id: null, language: 'en', snippet: 'Refunds…' };

describe('a stored message read as a record', () => {
  it('gives a citation stored without a link `url: null`, and keeps a stored link', () => {
    expect(toMessageRecord(row([stored]), []).citations).toEqual([{ ...stored, url: null }]);
    const linked = { ...stored, source_id: 's1', url: 'https://help.example.com/refunds' };
    expect(toMessageRecord(row([linked]), []).citations).toEqual([linked]);
  });
});
