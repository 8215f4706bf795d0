// Content negotiation that more than one part of the server must agree on.

/** Whether a request's Accept header asks for Server-Sent Events (media types ignore case). */
export const asksForEventStream = (accept: string | string[] | undefined): boolean =>
  /\btext\/event-stream\b/i.test(String(accept ?? ''));
