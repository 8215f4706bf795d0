// `workspace chat`: a conversation with the agent from a terminal. Each line read from standard
// input is a customer message; the agent's answer is printed as it streams (the typed client's
// `streamMessage`), then the documents it cites and the functions it called. Ends at the end of
// input or on `/exit`. Works piped too: `echo "Where is my order?" | workspace chat`.
import { createInterface } from 'node:readline';
import { createWorkspaceClient, type TurnEvent } from '../../client/src/index.js';
import type { CommandSpec, Invocation } from './commands.js';

type Done = Extract<TurnEvent, { event: 'done' }>['data'];
type Citation = Done['message']['citations'][number];

/** Where a citation leads: its link when it has one (a website page), else its document. */
const whereTo = (citation: Citation): string => citation.url ?? `document ${citation.document_id}`;

/** What follows the answer: the cited documents, and the functions called. */
function afterword(done: Done): string {
  const lines: string[] = [];
  const { citations, function_calls: calls } = done.message;
  if (citations.length > 0) {
    lines.push('Sources:');
    for (const [i, citation] of citations.entries()) {
      lines.push(`  [${i + 1}] ${citation.title} — ${whereTo(citation)}`);
    }
  }
  if (calls.length > 0) {
    lines.push('Function calls:');
    for (const c of calls) {
      lines.push(`  ${c.name}(${JSON.stringify(c.arguments)}) · ${c.type} · ${c.status}`);
    }
  }
  if (done.message.handoff) lines.push(`Handed over to ${done.message.handoff.agent_name}.`);
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

/** One turn: the answer streamed to standard output; answers whether it completed. */
async function turn(
  inv: Invocation,
  stream: AsyncIterable<TurnEvent>,
  state: { conversationId?: string },
): Promise<boolean> {
  const { out, err } = inv.io;
  let wroteText = false;
  for await (const event of stream) {
    state.conversationId = event.data.conversation_id;
    if (inv.json) {
      out.write(`${JSON.stringify(event)}\n`);
      continue;
    }
    if (event.event === 'message.delta') {
      out.write(event.data.delta);
      wroteText = true;
    } else if (event.event === 'done') {
      if (wroteText) out.write('\n');
      out.write(afterword(event.data));
      if (event.data.status === 'FAILED') {
        err.write(`workspace: the agent's turn failed: ${event.data.error?.code}: ${event.data.error?.message}\n`);
        return false;
      }
      if (event.data.status === 'WAITING_CLIENT') {
        err.write('workspace: the turn waits for client function results, which chat does not run.\n');
      }
    }
  }
  return true;
}

async function chat(inv: Invocation): Promise<number> {
  const connection = inv.connection();
  const client = createWorkspaceClient({
    baseUrl: connection.url,
    apiKey: 'apiKey' in connection.credential ? connection.credential.apiKey : '',
    maxRetries: 3,
  });
  const state: { conversationId?: string } = {};
  if (inv.values.conversation) state.conversationId = String(inv.values.conversation);
  const agentId = inv.values.agent as string | undefined;
  const lines = createInterface({ input: inv.io.stdin, terminal: false });
  const prompt = () => {
    if (inv.io.interactive) inv.io.err.write('you> ');
  };
  let failed = false;
  prompt();
  try {
    for await (const raw of lines) {
      const content = raw.trim();
      if (content === '/exit') break;
      if (content !== '') {
        const body = {
          content,
          ...(state.conversationId ? { conversation_id: state.conversationId } : {}),
          ...(agentId ? { agent_id: agentId } : {}),
        };
        // Piped in, the question is echoed so the output reads as a transcript.
        if (!inv.io.interactive && !inv.json) inv.io.out.write(`> ${content}\n`);
        // A refused message (a wrong --agent, a turn limit) or a broken stream throws: the chat ends.
        if (!(await turn(inv, client.streamMessage(body), state))) failed = true;
        if (!inv.json) inv.io.out.write('\n');
      }
      prompt();
    }
  } finally {
    lines.close();
    if (state.conversationId && !inv.json) inv.io.err.write(`conversation ${state.conversationId}\n`);
  }
  return failed ? 1 : 0;
}

export const CHAT_COMMAND: CommandSpec = {
  name: 'chat',
  args: [],
  summary: 'Talk with the agent: each line you type is a message, the answer streams back',
  details:
    'Reads messages from standard input, a line each (piped input works too), and prints the\n' +
    "agent's answer as it is produced, then the documents it cites (title and URL) and the\n" +
    'functions it called. Ends at the end of input or on /exit, printing the conversation id on\n' +
    'standard error; --conversation ID goes on with it later. With --json, every event of the\n' +
    'stream is printed as a line of JSON. Exits 1 when a turn failed.',
  auth: 'api-key',
  flags: [
    { name: 'agent', value: 'ID', help: "the agent to talk to (default: the workspace's default agent)" },
    { name: 'conversation', value: 'ID', help: 'go on with this conversation' },
  ],
  examples: ['workspace chat', 'echo "How long do refunds take?" | workspace chat --json'],
  run: chat,
};
