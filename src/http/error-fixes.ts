// What a client does about each error code, for the error catalogue at /docs/errors (src/http/docs.ts):
// the catalogue (src/operations/errors.ts) says when a code is answered, this what to change before
// trying again. One entry per code: the type makes a new code without a fix fail to compile.
import type { ErrorCode } from '../domain/errors.js';

const RETRY_WRITE =
  'Retry the same request: a 500 is not kept under its `Idempotency-Key`, so the retry runs again. If it keeps ' +
  'failing, give the operator the `event_id` of the answer: it names the entry in the server log.';

export const ERROR_FIXES: Record<ErrorCode, string> = {
  not_authenticated:
    'Send the API key in the `X-API-Key` header (the control plane, /admin/v1, takes ' +
    '`Authorization: Bearer <operator token>`). A workspace owner creates keys on the settings page ' +
    '(/admin/settings/integrations/api).',
  invalid_api_key:
    'Check that the whole key was sent, and that it is active (not expired, locked or revoked: the settings page ' +
    "shows its status). On a tenant's own host, use a key of that tenant, or call a host that names no tenant.",
  insufficient_scope:
    'Use a key holding the scope the message names (each operation names it: "Requires scope …"), or the write ' +
    "scope of its resource. A key's scopes cannot change: create a key with the scopes you need.",
  not_found:
    "Check the id (path ids are UUIDs) and that it belongs to the key's tenant; `param` names the field when the " +
    'id was in the body. A deleted resource is gone: create it again.',
  bad_request:
    'Send a JSON object as the body, with `Content-Type: application/json` (UTF-8). An operation that takes no ' +
    'body takes none, or `{}`. The message says what could not be read.',
  validation_error:
    'Correct the parameter `param` names as the message says (type, bounds, format), or leave it out when it is ' +
    'unknown: the reference at /docs shows what each operation takes.',
  missing_required_parameter: 'Add the field `param` names to the body.',
  invalid_parameters:
    'Correct the value `param` names: an id must name a resource of this tenant, a value must fit what the ' +
    'message says.',
  conflict:
    'Pick another name, or bring the resource to a state that allows the change first (the message says which). ' +
    'For a reused `Idempotency-Key`, send a new key with a new request, or wait for the first request to finish.',
  too_many_items: 'Send at most 100 items in one call: split the batch into several calls.',
  empty_items: 'Send at least one item, or skip the call.',
  ambiguous_addressing: 'Name the documents one way only: `document_ids`, or `source_id` with `page_ids`.',
  creation_failed: RETRY_WRITE,
  update_failed: RETRY_WRITE,
  deletion_failed: RETRY_WRITE,
  export_failed: 'Ask for a smaller date range, or retry later.',
  request_too_large:
    'Send a smaller body (the message names the limit it crossed): split a batch into several calls, upload ' +
    'large content in parts, and keep headers under 16 KB.',
  rate_limit_exceeded:
    'Wait the `Retry-After` seconds, then retry. The `RateLimit-Remaining` and `RateLimit-Reset` headers of every ' +
    'answer tell how much of the minute’s budget is left; spread requests to stay within it.',
  concurrency_limit_exceeded: 'Wait the `Retry-After` seconds, then retry; send fewer MCP requests at the same time.',
  turn_limit_exceeded:
    'Wait the `Retry-After` seconds, then retry. Fewer turns at once help: read streamed turns to their end, and ' +
    'send the results that waiting turns ask for (POST /api/v1/messages/{message_id}/continue).',
  forbidden_origin:
    'Call the MCP endpoint from a server, where no `Origin` is sent, or have the operator add this origin to ' +
    'MCP_ALLOWED_ORIGINS.',
  service_unavailable:
    'Retry after the `Retry-After` seconds: nothing was done, so the retry is safe. If it lasts, tell the operator.',
  internal_error:
    'Retry the request. If it keeps failing, give the operator the `event_id` of the answer: it names the entry in ' +
    'the server log.',
};
