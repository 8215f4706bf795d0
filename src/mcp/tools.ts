// MCP tools from the operation registry (DESIGN.md §6): one tool per operation, named after its
// id in snake_case, its input the operation's params, query and body as one JSON object, run
// under the calling key's scopes with the same validation, rules and errors as over REST.
import type { TSchema } from '@sinclair/typebox';
import { type AuthContext, mayCall } from '../operations/context.js';
import { DomainError } from '../operations/errors.js';
import type { InputPart } from '../operations/invoke.js';
import { type Operation, toolName } from '../operations/registry.js';
import { type Validator, validatorOf } from '../operations/validation.js';

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
  name: InputPart;
  validate: Validator;
  /** The input keys this part takes; for a body nested under `body`, the one key. */
  keys: string[];
  nested: boolean;
}

export interface Tool {
  operation: Operation;
  definition: ToolDefinition;
  parts: Part[];
  /** Each part's validator, for the pipeline to run (src/operations/invoke.ts). */
  validators: Partial<Record<InputPart, Validator>>;
}

const plain = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema));

function propertiesOf(schema: TSchema | undefined): { properties: Record<string, unknown>; required: string[] } {
  if (!schema) return { properties: {}, required: [] };
  const object = plain(schema) as { properties?: Record<string, unknown>; required?: string[] };
  return { properties: object.properties ?? {}, required: object.required ?? [] };
}

export function buildTools(operations: Operation[]): Map<string, Tool> {
  // Arguments are JSON, as a body is: taken as sent, never coerced.
  const compiledOnFirstUse = (schema: TSchema) => validatorOf(plain(schema), 'json');
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
      validators: Object.fromEntries(parts.map((part) => [part.name, part.validate])),
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

export const toolAllowed = (tool: Tool, auth: AuthContext) => mayCall(auth, tool.operation.scope);

/** Splits tool arguments into the operation's parts; an argument no part takes is refused. */
export function bindArguments(tool: Tool, args: Record<string, unknown>): Record<InputPart, unknown> {
  const bound: Record<InputPart, unknown> = { params: {}, query: {}, body: undefined };
  const known = new Set(tool.parts.flatMap((p) => p.keys));
  for (const key of Object.keys(args)) {
    if (!known.has(key)) throw new DomainError('validation_error', `Unknown parameter: ${key}.`, key);
  }
  for (const part of tool.parts) {
    if (part.nested) {
      bound[part.name] = args.body ?? {};
    } else {
      const picked: Record<string, unknown> = {};
      for (const key of part.keys) if (Object.hasOwn(args, key)) picked[key] = args[key];
      bound[part.name] = picked;
    }
  }
  return bound;
}
