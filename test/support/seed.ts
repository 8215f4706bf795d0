// One of every kind of resource a `/api/v1` path parameter can name, made for a tenant through the
// public API, with the real values to put in those parameters. For tests that go over every
// operation of the OpenAPI document (test/proof/isolation-matrix.test.ts) rather than one area.
import type { CallOptions, CallResult, TestApp } from '../helpers.js';

export interface Seeded {
  /**
   * The value of each path parameter, by its name in the OpenAPI paths (`task_id`, `id_or_slug`,
   * `external_id`…). Today every name means one kind of resource wherever it appears; one that
   * meant another on some path would get its value for that path in `byPath`.
   */
  params: Record<string, string>;
  /** Values for one path (written as the document writes it, `{…}` and all) that win over `params`. */
  byPath: Record<string, Record<string, string>>;
  /** What request bodies may refer to: resources without a path parameter of their own, and names. */
  refs: {
    personaId: string;
    /** The one domain of the referential's questions. */
    domain: string;
    /** The call the paused turn (`message_id`) waits on. */
    callId: string;
    /** A permission the user does not hold yet. */
    permission: string;
  };
  /** Every id and name made, to check that none shows up where it should not. */
  values: string[];
}

/** The value of path parameter `name` on `path` for a seeded tenant; undefined when none was made. */
export const paramValue = (seeded: Seeded, path: string, name: string): string | undefined =>
  seeded.byPath[path]?.[name] ?? seeded.params[name];

/** A public address given as an IP (no DNS needed); the seed never runs the jobs that would send to it. */
const WEBHOOK_URL = 'https://93.184.215.14/hooks/seed';

async function send(t: TestApp, key: string, options: Omit<CallOptions, 'key'>, status: number): Promise<CallResult> {
  const r = await t.call({ ...options, key });
  if (r.status !== status) throw new Error(`seed: ${options.method ?? 'GET'} ${options.url}: ${r.status} ${r.text}`);
  return r;
}

const post = (t: TestApp, key: string, url: string, body: unknown, status = 201) =>
  send(t, key, { method: 'POST', url, body }, status);

/**
 * Seeds each tenant; `label` keeps its names apart from the other tenants' (apps and custom data
 * sources are addressed by name), so use labels that are not part of one another. The jobs that
 * the simulation run, the coverage evaluation and the question extraction need are run once for
 * all; the webhook endpoints and their deliveries come after, and their delivery jobs are left
 * queued: they would send to a public address. Do not run jobs afterwards.
 */
export async function seedTenants(t: TestApp, tenants: { key: string; label: string }[]): Promise<Seeded[]> {
  const seeded: Seeded[] = [];
  for (const { key, label } of tenants) seeded.push(await seedWithoutWebhooks(t, key, label));
  await t.jobs.runUntilIdle();
  for (const [i, { key, label }] of tenants.entries()) {
    const s = seeded[i] as Seeded;
    const run = await send(t, key, { url: `/api/v1/simulation/runs/${s.params.run_id}` }, 200);
    const evaluation = await send(t, key, { url: `/api/v1/coverage/evaluations/${s.params.evaluation_id}` }, 200);
    if (run.body.status !== 'completed' || evaluation.body.status !== 'completed') {
      throw new Error(`seed: jobs did not complete: ${run.text} ${evaluation.text}`);
    }
    await seedWebhooks(t, key, label, s);
  }
  return seeded;
}

async function seedWithoutWebhooks(t: TestApp, key: string, label: string): Promise<Seeded> {
  const values: string[] = [];
  /** Records made ids and names; answers the first. */
  const keep = (...made: string[]) => {
    values.push(...made);
    return made[0] as string;
  };
  const named = (kind: string) => keep(`${kind}-${label}`);
  const created = async (url: string, body: unknown, status = 201) =>
    keep((await post(t, key, url, body, status)).body.id);

  const app = named('app');
  await post(t, key, '/api/v1/apps', { name: app });
  await post(
    t,
    key,
    `/api/v1/apps/${app}/commits`,
    { message: 'first', files: [{ path: 'a.md', content: '# a' }] },
    200,
  );

  const workflowId = await created('/api/v1/workflows', { name: named('flow') });

  const sourceId = await created('/api/v1/sources', { name: named('source'), source_type: 'manual' });
  // In no source: deleting the source would take it along, and each record here should be
  // deletable without taking another one with it.
  const documentId = await created('/api/v1/documents', {
    title: named('opening-hours'),
    content: 'We are open from nine to five, Monday to Friday.',
  });
  await created(`/api/v1/documents/${documentId}/translations`, {
    language: 'fr',
    title: named('horaires'),
    content: 'Ouvert de neuf heures à dix-sept heures.',
  });

  const agentId = await created('/api/v1/agents', { name: named('agent') });
  // A question no document answers: the agent records a knowledge update request (DESIGN.md §8).
  const asked = await post(t, key, '/api/v1/messages', { content: 'Do you deliver to Antarctica by zeppelin?' }, 200);
  const conversationId = keep(asked.body.conversation_id, asked.body.id);
  const gaps = await send(t, key, { url: '/api/v1/knowledge-update-requests' }, 200);
  const gapId = keep(gaps.body.data[0].id);
  // A turn paused on a client function (DESIGN.md §8): its message awaits the call's result.
  const paused = await post(
    t,
    key,
    '/api/v1/messages',
    {
      content: 'lookup_order please',
      client_functions: [{ name: 'lookup_order', description: 'Finds an order' }],
      client_functions_mode: 'pause',
    },
    200,
  );
  if (paused.body.status !== 'WAITING_CLIENT') throw new Error(`seed: the turn did not pause: ${paused.text}`);
  const messageId = keep(paused.body.id, paused.body.conversation_id);

  const slug = named('cds');
  const customId = await created('/api/v1/custom-data-sources', { name: named('orders'), slug });
  const externalId = named('row');
  await send(
    t,
    key,
    { method: 'PUT', url: `/api/v1/custom-data-sources/${slug}/rows/${externalId}`, body: { data: { n: 1 } } },
    201,
  );
  const smartId = await created('/api/v1/smart-sources', { name: named('smart'), data_source: slug });
  await post(
    t,
    key,
    `/api/v1/smart-sources/${smartId}/ingest`,
    { rows: [{ external_id: named('ingested'), data: {} }] },
    200,
  );

  const datasetId = await created('/api/v1/simulation/datasets', { name: named('dataset'), agent_id: agentId });
  const testCaseId = await created(`/api/v1/simulation/datasets/${datasetId}/test-cases`, {
    question: 'When are you open?',
    expected_type: 'no_answer',
  });
  await created(`/api/v1/simulation/datasets/${datasetId}/import/conversation/${conversationId}`, {});
  const runId = await created(`/api/v1/simulation/datasets/${datasetId}/runs`, {});
  const personaId = await created('/api/v1/simulation/personas', { name: named('persona'), description: 'terse' });

  const domain = named('domain');
  const referentialId = await created('/api/v1/coverage/referentials', { name: named('referential') });
  await post(t, key, `/api/v1/coverage/referentials/${referentialId}/questions`, {
    questions: [{ question: 'When are you open?', domain }],
  });
  const evaluationId = await created('/api/v1/coverage/evaluations', { referential_id: referentialId }, 202);
  await created('/api/v1/coverage/extract', { referential_id: referentialId }, 202);

  const taskId = await created('/api/v1/tasks', { title: named('task') });
  await created(`/api/v1/tasks/${taskId}/comments`, { content: named('comment') });
  const linkId = await created(`/api/v1/tasks/${taskId}/links`, {
    target_type: 'conversation',
    target_id: conversationId,
  });

  return {
    params: {
      name: app,
      workflow_id: workflowId,
      source_id: sourceId,
      document_id: documentId,
      knowledge_update_request_id: gapId,
      agent_id: agentId,
      conversation_id: conversationId,
      message_id: messageId,
      thread_id: conversationId,
      id_or_slug: customId,
      external_id: externalId,
      smart_source_id: smartId,
      dataset_id: datasetId,
      test_case_id: testCaseId,
      run_id: runId,
      referential_id: referentialId,
      evaluation_id: evaluationId,
      task_id: taskId,
      link_id: linkId,
    },
    // The custom data source by its slug on its own paths, by its id on its rows' paths: both forms.
    byPath: {
      '/api/v1/custom-data-sources/{id_or_slug}': { id_or_slug: slug },
      '/api/v1/custom-data-sources/{id_or_slug}/rows/clear': { id_or_slug: slug },
    },
    refs: { personaId, domain, callId: paused.body.function_calls[0].call_id, permission: 'knowledge.view' },
    values,
  };
}

/** An endpoint for `user.created`, then a user: its event leaves one delivery in the endpoint's log. */
async function seedWebhooks(t: TestApp, key: string, label: string, s: Seeded) {
  const endpoint = await post(t, key, '/api/v1/webhook-endpoints', {
    url: WEBHOOK_URL,
    events: ['user.created'],
    description: `hook-${label}`,
  });
  const user = (await post(t, key, '/api/v1/users', { email: `ana.${label}@example.com`, permissions: ['tasks.view'] }))
    .body;
  const deliveries = await send(t, key, { url: `/api/v1/webhook-endpoints/${endpoint.body.id}/deliveries` }, 200);
  const deliveryId = deliveries.body.data[0]?.id;
  if (!deliveryId) throw new Error(`seed: no delivery: ${deliveries.text}`);
  Object.assign(s.params, {
    endpoint_id: endpoint.body.id,
    delivery_id: deliveryId,
    user_id: user.id,
    permission_id: user.permissions[0].id,
  });
  s.values.push(endpoint.body.id, `hook-${label}`, deliveryId, user.id, user.permissions[0].id, user.email);
}
