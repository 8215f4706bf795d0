// Simulation personas (docs/simulations.md): who asks a test case, a name unique in the workspace
// and a description. Datasets and test cases refer to them.
import type { Db } from '../../db/index.js';
import { isUniqueViolation } from '../../db/index.js';
import { newId } from '../../lib/ids.js';
import { iso } from '../../lib/time.js';
import { ConflictError, ValidationError } from '../errors.js';
import { newestFirst, type Page, toList } from '../pagination.js';
import type { PersonaRecord } from './records.js';

const toPersonaRecord = (row: { id: string; name: string; description: string; created_at: Date }): PersonaRecord => ({
  id: row.id,
  object: 'simulation_persona',
  name: row.name,
  description: row.description,
  created_at: iso(row.created_at),
});

export async function createPersona(
  db: Db,
  tenantId: string,
  input: { name: string; description: string },
): Promise<PersonaRecord> {
  if (input.name.trim() === '') throw new ValidationError('name', 'name must not be blank.');
  try {
    const row = await db
      .insertInto('simulation_personas')
      .values({ id: newId(), tenant_id: tenantId, name: input.name, description: input.description })
      .returning(['id', 'name', 'description', 'created_at'])
      .executeTakeFirstOrThrow();
    return toPersonaRecord(row);
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`A persona named '${input.name}' already exists.`, 'name');
    throw error;
  }
}

export async function listPersonas(db: Db, tenantId: string, page: Page) {
  let query = db
    .selectFrom('simulation_personas')
    .select(['id', 'name', 'description', 'created_at'])
    .where('tenant_id', '=', tenantId);
  query = newestFirst(query, page);
  return toList(await query.execute(), page, toPersonaRecord, (row) => row.id);
}
