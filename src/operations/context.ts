// Who calls an operation, and what they may do: the one scope rule every way of calling applies
// (REST before the body is read, MCP per tool call).
import { allows, type Scope } from '../domain/accounts/scopes.js';
import { DomainError } from '../domain/errors.js';

/** An authenticated API key: its tenant, its identity and its scopes. */
export interface AuthContext {
  tenantId: string;
  keyId: string;
  keyName: string;
  scopes: string[];
}

/** Whether the key may call an operation that requires `required` (the tools a key may list). */
export const mayCall = (auth: AuthContext, required: Scope): boolean => allows(auth.scopes, required);

/** Refuses (403 `insufficient_scope`) a key that lacks `required`. */
export function authorize(auth: AuthContext, required: Scope): void {
  if (!mayCall(auth, required)) {
    throw new DomainError('insufficient_scope', `This API key lacks the scope '${required}'.`);
  }
}
