// The catalogue of webhook events: each type with what it means and the TypeBox schema
// of its `data`. One definition serves the emitter's types (`emitEvent` only takes a known type
// with its data), the check of an endpoint's `events`, and the OpenAPI document's `webhooks`
// section (src/http/docs.ts). Every event is sent as `{id, type, created_at, data}`.
//
// Where an event is about a resource, `data` carries it under its own name as the API returns it
// (GET of that resource), so a receiver needs no follow-up call; the schemas name the fields a
// receiver can rely on and allow more, since areas add fields over time (spec: Versioning 3).
import { type Static, type TObject, type TSchema, Type } from '@sinclair/typebox';

const Id = Type.String({ format: 'uuid' });
const Time = Type.String({ format: 'date-time' });
const NullableString = Type.Union([Type.String(), Type.Null()]);
const open = <T extends TObject['properties']>(properties: T, description: string) =>
  Type.Object(properties, { additionalProperties: true, description });

const Person = Type.Object(
  { id: Type.String(), name: Type.String(), email: NullableString },
  { description: 'A person summary (spec: task comment).' },
);

const TaskSummary = Type.Object({
  id: Id,
  identifier: Type.String({ description: '`TASK-<n>`.' }),
  title: Type.String(),
});

const User = open(
  {
    id: Id,
    object: Type.Literal('user'),
    email: Type.String(),
    name: Type.String(),
    role: Type.String(),
    permissions: Type.Array(Type.Object({ id: Id, name: Type.String() })),
    created_at: Time,
    updated_at: Time,
  },
  'The user as GET /users/{user_id} returns it.',
);

const Source = open(
  {
    id: Id,
    object: Type.Literal('source'),
    name: Type.String(),
    source_type: Type.String(),
    domain: NullableString,
    sync_status: Type.String(),
    sync_error: NullableString,
    last_synced_at: Type.Union([Time, Type.Null()]),
  },
  'The source as GET /sources/{source_id} returns it.',
);

export const EVENT_TYPES = {
  'task.comment.created': {
    summary: 'A comment was added to a task',
    description:
      'Sent when a comment is added to a task. `comment.mentions` lists the staff users it mentions: ' +
      'this is how a mention notifies people outside the product.',
    data: Type.Object({
      task: TaskSummary,
      comment: open(
        {
          id: Id,
          object: Type.Literal('task_comment'),
          task_id: Id,
          content: Type.String(),
          mentions: Type.Array(Person),
          author: Person,
          created_at: Time,
        },
        'The comment as GET /tasks/{task_id}/comments lists it.',
      ),
    }),
  },
  'task.link.created': {
    summary: 'A task was linked to a target',
    description: 'Sent when a new link is made from a task (linking the same target again sends nothing).',
    data: Type.Object({
      task: TaskSummary,
      link: open(
        {
          id: Id,
          object: Type.Literal('task_link'),
          task_id: Id,
          target_type: Type.String(),
          target_id: Id,
          admin_url: Type.String(),
          created_at: Time,
        },
        'The link as GET /tasks/{task_id}/links lists it.',
      ),
    }),
  },
  'source.sync.completed': {
    summary: 'A source sync completed',
    description: 'Sent when a sync of a knowledge source finishes and its documents are up to date.',
    data: Type.Object({ source: Source }),
  },
  'source.sync.failed': {
    summary: 'A source sync failed',
    description: 'Sent when a sync of a knowledge source fails for good; `source.sync_error` says why.',
    data: Type.Object({ source: Source }),
  },
  'simulation.run.completed': {
    summary: 'A simulation run finished',
    description: 'Sent when a simulation run reaches its end (completed or failed; see `run.status`).',
    data: Type.Object({
      run: open(
        { id: Id, object: Type.Literal('simulation_run'), dataset_id: Id, status: Type.String() },
        'The run as GET /simulation/runs/{run_id} returns it.',
      ),
    }),
  },
  'coverage.evaluation.completed': {
    summary: 'A coverage evaluation finished',
    description: 'Sent when a knowledge-coverage evaluation reaches its end (see `evaluation.status`).',
    data: Type.Object({
      evaluation: open(
        { id: Id, referential_id: Id, status: Type.String() },
        'The evaluation as GET /coverage/evaluations/{id} returns it.',
      ),
    }),
  },
  'knowledge_update_request.created': {
    summary: 'A knowledge gap was recorded',
    description:
      'Sent when the agent could not answer a question from the knowledge and a new knowledge update ' +
      'request was opened (a repeat of an open question adds an occurrence and sends nothing).',
    data: Type.Object({
      knowledge_update_request: open(
        {
          id: Id,
          object: Type.Literal('knowledge_update_request'),
          question: Type.String(),
          status: Type.String(),
          conversation_id: Type.Union([Id, Type.Null()]),
          message_id: Type.Union([Id, Type.Null()]),
          created_at: Time,
        },
        'The request as GET /knowledge-update-requests/{id} returns it.',
      ),
    }),
  },
  'conversation.turn.waiting_client': {
    summary: 'A turn waits for client function results',
    description:
      'Sent when a message turn stops with status `WAITING_CLIENT`: the agent called client functions and ' +
      'waits for `POST /messages/{id}/function-results`.',
    data: Type.Object({
      conversation_id: Id,
      message_id: Id,
      function_calls: Type.Array(
        Type.Object({ call_id: Type.String(), name: Type.String(), arguments: Type.Unknown() }),
        { description: 'The client function calls waiting for a result.' },
      ),
    }),
  },
  'user.created': {
    summary: 'A staff user was created',
    description: 'Sent when `POST /users` creates a user (an update of an existing e-mail sends nothing).',
    data: Type.Object({ user: User }),
  },
  'user.permissions.changed': {
    summary: "A user's permissions changed",
    description:
      'Sent when permissions are granted to or removed from a user; `added` and `removed` name what changed.',
    data: Type.Object({
      user: User,
      added: Type.Array(Type.String()),
      removed: Type.Array(Type.String()),
    }),
  },
} as const satisfies Record<string, { summary: string; description: string; data: TSchema }>;

export type EventType = keyof typeof EVENT_TYPES;
export type EventData<T extends EventType> = Static<(typeof EVENT_TYPES)[T]['data']>;

export const EVENT_TYPE_NAMES = Object.keys(EVENT_TYPES) as EventType[];
/** Subscribes an endpoint to every type, those added later included. */
export const ALL_EVENTS = '*';

export const isEventType = (value: string): value is EventType => Object.hasOwn(EVENT_TYPES, value);

/** The body sent for one event type: the envelope with its `data`. */
export function eventEnvelope(type: EventType): TObject {
  return Type.Object(
    {
      id: Type.String({ format: 'uuid', description: 'The event id; the same for every endpoint it is sent to.' }),
      type: Type.Literal(type),
      created_at: Type.String({ format: 'date-time', description: 'When the event happened.' }),
      data: EVENT_TYPES[type].data,
    },
    { title: `Event ${type}` },
  );
}

const SIGNATURE_HEADERS = [
  {
    name: 'webhook-id',
    description: 'The delivery id: the same on every retry and replay of this event to this endpoint.',
  },
  { name: 'webhook-timestamp', description: 'Unix seconds when this attempt was signed.' },
  {
    name: 'webhook-signature',
    description:
      'Space-separated `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`, keyed with the ' +
      'base64-decoded part of the endpoint secret after `whsec_`; two signatures during a secret rotation.',
  },
];

interface WebhookPathItem {
  post: {
    operationId: string;
    tags: string[];
    summary: string;
    description: string;
    parameters: { in: 'header'; name: string; required: boolean; description: string; schema: { type: 'string' } }[];
    // biome-ignore lint/suspicious/noExplicitAny: a plain JSON Schema, typed by the OpenAPI types of its reader.
    requestBody: { required: boolean; content: { 'application/json': { schema: any } } };
    responses: Record<string, { description: string }>;
  };
}

/** The OpenAPI 3.1 `webhooks` object: one entry per event type (Standard Webhooks headers). */
export function openApiWebhooks(): Record<string, WebhookPathItem> {
  return Object.fromEntries(
    EVENT_TYPE_NAMES.map((type) => [
      type,
      {
        post: {
          operationId: `webhook:${type}`,
          tags: ['Webhooks'],
          summary: EVENT_TYPES[type].summary,
          description: `${EVENT_TYPES[type].description}\n\nSigned per Standard Webhooks; see docs/webhooks.md.`,
          parameters: SIGNATURE_HEADERS.map((h) => ({
            in: 'header' as const,
            name: h.name,
            required: true,
            description: h.description,
            schema: { type: 'string' as const },
          })),
          requestBody: {
            required: true,
            content: { 'application/json': { schema: JSON.parse(JSON.stringify(eventEnvelope(type))) } },
          },
          responses: {
            '2XX': {
              description:
                'Received. Any other answer, or none within the delivery timeout (10 s by default), is retried.',
            },
          },
        },
      },
    ]),
  );
}
