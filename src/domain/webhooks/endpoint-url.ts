import { OutboundRequestError, resolveTarget } from '../../lib/ssrf.js';
import { ValidationError } from '../errors.js';

/** An absolute http(s) URL without credentials whose host resolves to allowed addresses. */
export async function checkUrl(raw: string, allowPrivateTargets: boolean): Promise<string> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ValidationError('url', 'url must be an absolute http or https URL.');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ValidationError('url', `url must use http or https, not '${url.protocol.replace(/:$/, '')}'.`);
  }
  if (url.username || url.password) throw new ValidationError('url', 'url must not carry credentials.');
  if (url.hash) throw new ValidationError('url', 'url must not carry a fragment (#…).');
  try {
    await resolveTarget(url, { allowPrivate: allowPrivateTargets });
  } catch (error) {
    if (error instanceof OutboundRequestError) {
      throw new ValidationError(
        'url',
        error.reason === 'blocked'
          ? `url is refused: ${error.message} Webhooks go to public addresses only.`
          : `url is refused: ${error.message}`,
      );
    }
    throw error;
  }
  return url.href;
}
