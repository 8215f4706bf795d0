// The OpenAPI document as the suites read it (fuzz, isolation, scope matrix): its operations, one
// per path and method.

/** An operation of the document: its method, its path as the document writes it, and its object. */
export interface DocumentOperation {
  /** Upper case: `GET`, `POST`… */
  method: string;
  /** With `{name}` parameters, as the document writes it. */
  path: string;
  // biome-ignore lint/suspicious/noExplicitAny: an OpenAPI operation object, read loosely.
  spec: any;
}

/** The methods an OpenAPI path item can hold an operation under. */
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every operation of `document`, in its order. */
// biome-ignore lint/suspicious/noExplicitAny: the document is read loosely.
export function documentOperations(document: any): DocumentOperation[] {
  return Object.entries(document.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, spec]) => ({ method: method.toUpperCase(), path, spec })),
  );
}
