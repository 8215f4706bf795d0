// Server-Sent Events framing (the WHATWG HTML standard, "Parsing an event stream"): lines end with
// CRLF, LF or CR; `:` starts a comment (the server's keep-alive); `event:` and `data:` fields
// build a frame, a blank line sends it. Written here rather than taken from a package so the
// client has one dependency (openapi-fetch); it is the whole of what the message turns send.

export interface SseFrame {
  /** The `event:` field; `message` when absent, as the standard says. */
  event: string;
  /** The `data:` lines joined by `\n`. */
  data: string;
}

/** The frames of a byte stream, as they complete; a frame cut off by the stream's end is dropped. */
export async function* readSseFrames(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<SseFrame, void, undefined> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data: string[] = [];
  let afterCr = false;
  for await (const chunk of chunks) {
    buffer += decoder.decode(chunk, { stream: true });
    // A CR that ended the previous chunk already ended its line: a LF that follows it is its pair.
    if (afterCr && buffer.startsWith('\n')) buffer = buffer.slice(1);
    afterCr = false;
    for (;;) {
      const end = buffer.search(/[\r\n]/);
      if (end === -1) break;
      const line = buffer.slice(0, end);
      let next = end + 1;
      if (buffer[end] === '\r') {
        if (next === buffer.length) afterCr = true;
        else if (buffer[next] === '\n') next++;
      }
      buffer = buffer.slice(next);
      if (line === '') {
        if (data.length > 0) yield { event: event || 'message', data: data.join('\n') };
        event = '';
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
  }
}
