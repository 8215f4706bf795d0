// Settings pages answer in HTML, errors included; a 429 keeps its Retry-After.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnreachable } from '../db/index.js';
import { DomainError } from '../domain/errors.js';
import { newId } from '../lib/ids.js';
import { ERROR_CATALOGUE, summarize, UNAVAILABLE_RETRY_AFTER_S } from '../operations/errors.js';
import { html, type SettingsDeps } from './context.js';
import { errorPage } from './pages.js';

/** The settings pages' error handler: a page saying what went wrong, and an event id on a 500. */
export function settingsErrorHandler({ outages }: Pick<SettingsDeps, 'outages'>) {
  return async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    let status = 500;
    let message = 'An unexpected error occurred. Please try again.';
    if (error instanceof DomainError) {
      status = ERROR_CATALOGUE[error.code].status;
      message = error.message;
    } else if (isDatabaseUnreachable(error)) {
      outages?.failed(error);
      reply.header('retry-after', UNAVAILABLE_RETRY_AFTER_S);
      return html(reply, 503, errorPage(503, 'The service is briefly unavailable. Please try again in a few seconds.'));
    } else if (error.code === 'FST_CSRF_INVALID_TOKEN' || error.code === 'FST_CSRF_MISSING_SECRET') {
      status = 403;
      message = 'This form has expired or did not come from this page. Reload the page and try again.';
    } else if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
      status = error.statusCode;
      message = 'The request could not be understood.';
    }
    if (status >= 500) {
      const eventId = newId();
      request.log.error({ err: summarize(error), event_id: eventId }, 'settings page failed');
      message = `${message} (event ${eventId})`;
    }
    return html(reply, status, errorPage(status, message));
  };
}
