// MCP tools from the operation registry (DESIGN.md §6): one tool per operation, named after its
// id in snake_case, its input the operation's params, query and body as one JSON object, run
// under the calling key's scopes with the same validation, rules and errors as over REST.
import type { TSchema } from '@sinclair/typebox';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { allows } from '../domain/accounts/scopes.js';
import { DomainError } from '../domain/errors.js';
import { addLowerCaseKeyword } from '../domain/shapes.js';
import type { AuthContext } from '../http/auth.js';
import { fromValidation } from '../http/errors.js';
import { lazyValidator, type Validate } from '../http/lazy-compile.js';
import { type Operation, toolName, WithStatus } from '../operations/registry.js';

export interface ToolDefinition {
  name: string;
  title: string;
  description: string;
  inputSchema: { type: 'object'; properties: Record<string, unknown>; required?: string[] };
  outputSchema?: Record<string, unknown>;
  annotations: {
    title: string;
    readOnlyHint: boolean;
    destructiveHint: boolean;
    idempotentHint: boolean;
    openWorldHint: boolean;
  };
}

interface Part {
  name: 'params' | 'query' | 'body';
  validate: Validate<ValidateFunction['errors']>;
  /** The input keys this part takes; for a body nested under `body`, the one key. */
  keys: string[];
  nested: boolean;
}

export interface Tool {
  operation: Operation;
  definition: ToolDefinition;
  parts: Part[];
}

const plain = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema));

function propertiesOf(schema: TSchema | undefined): { properties: Record<string, unknown>; required: string[] } {
  if (!schema) return { properties: {}, required: [] };
  const object = plain(schema) as { properties?: Record<string, unknown>; required?: string[] };
  return { properties: object.properties ?? {}, required: object.required ?? [] };
}

export function buildTools(operations: Operation[]): Map<string, Tool> {
  const ajv = new Ajv({
    allErrors: false,
    removeAdditional: false,
    useDefaults: true,
    coerceTypes: false,
    strict: false,
  });
  addFormats.default(ajv);
  addLowerCaseKeyword(ajv);
  const compiledOnFirstUse = (schema: TSchema) => lazyValidator(() => ajv.compile(plain(schema)));
  const tools = new Map<string, Tool>();
  for (const op of operations) {
    const params = propertiesOf(op.params);
    const query = propertiesOf(op.query);
    const body = propertiesOf(op.body);
    const properties: Record<string, unknown> = { ...params.properties, ...query.properties };
    const required = [...params.required, ...query.required];
    const parts: Part[] = [];
    if (op.params)
      parts.push({
        name: 'params',
        validate: compiledOnFirstUse(op.params),
        keys: Object.keys(params.properties),
        nested: false,
      });
    if (op.query)
      parts.push({
        name: 'query',
        validate: compiledOnFirstUse(op.query),
        keys: Object.keys(query.properties),
        nested: false,
      });
    if (op.body) {
      // A body field named like a path parameter would collide: then the body is one `body` field.
      const collides = Object.keys(body.properties).some((k) => k in properties);
      if (collides) {
        properties.body = plain(op.body);
        if (body.required.length > 0) required.push('body');
      } else {
        Object.assign(properties, body.properties);
        required.push(...body.required);
      }
      parts.push({
        name: 'body',
        validate: compiledOnFirstUse(op.body),
        keys: collides ? ['body'] : Object.keys(body.properties),
        nested: collides,
      });
    }
    const readOnly = op.scope.endsWith(':read');
    const name = toolName(op.id);
    const response = plain(op.response);
    tools.set(name, {
      operation: op,
      parts,
      definition: {
        name,
        title: op.summary,
        description: `${op.description} (${op.method} ${op.path.replace(/:([A-Za-z_]+)/g, '{$1}')}; scope ${op.scope})`,
        inputSchema: {
          type: 'object',
          properties,
          ...(required.length > 0 ? { required: [...new Set(required)] } : {}),
        },
        ...(response.type === 'object' ? { outputSchema: response } : {}),
        annotations: {
          title: op.summary,
          readOnlyHint: readOnly,
          destructiveHint: !readOnly && Boolean(op.destructive),
          idempotentHint: readOnly || Boolean(op.idempotent) || op.method === 'PUT' || op.method === 'DELETE',
          openWorldHint: false,
        },
      },
    });
  }
  return tools;
}

export const toolAllowed = (tool: Tool, auth: AuthContext) => allows(auth.scopes, tool.operation.scope);

/** Splits tool arguments into the operation's parts and validates each as the route would. */
export function bindArguments(tool: Tool, args: Record<string, unknown>) {
  const bound: Record<'params' | 'query' | 'body', unknown> = { params: {}, query: {}, body: undefined };
  const known = new Set(tool.parts.flatMap((p) => p.keys));
  for (const key of Object.keys(args)) {
    if (!known.has(key)) throw new DomainError('validation_error', `Unknown parameter: ${key}.`, key);
  }
  for (const part of tool.parts) {
    let value: unknown;
    if (part.nested) {
      value = args.body ?? {};
    } else {
      const picked: Record<string, unknown> = {};
      for (const key of part.keys) if (Object.hasOwn(args, key)) picked[key] = args[key];
      value = picked;
    }
    if (!part.validate(value)) {
      const first = part.validate.errors?.[0];
      if (first) {
        // A path argument left out is missing, as a required body field is (over HTTP a path
        // always holds one).
        if (part.name === 'params' && first.keyword === 'required') {
          const param = String(first.params.missingProperty);
          throw new DomainError('missing_required_parameter', `Missing required parameter: ${param}.`, param);
        }
        // Otherwise the same mapping as over HTTP: a malformed path id is `not_found`, as in REST.
        const mapped = fromValidation(part.name === 'query' ? 'querystring' : part.name, first);
        throw new DomainError(mapped.code, mapped.message, mapped.param);
      }
    }
    bound[part.name] = value;
  }
  return bound;
}

export function unwrap(result: unknown): unknown {
  return result instanceof WithStatus ? result.body : result;
}
