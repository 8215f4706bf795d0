import type { Db } from '../../db/index.js';
import { SEALED, type SecretBox } from '../../lib/secret-box.js';

/**
 * Maintenance at start, across tenants: with SECRETS_KEY set, seals the secrets stored before
 * it was, and with SECRETS_KEY_PREVIOUS set too, seals again under SECRETS_KEY those sealed
 * under the previous key (each row only if unchanged meanwhile, so instances starting together
 * agree). Returns how many endpoints it changed.
 */
export async function sealStoredSecrets(db: Db, secrets: SecretBox): Promise<number> {
  if (!secrets.sealing) return 0;
  let query = db.selectFrom('webhook_endpoints').select(['id', 'secret', 'previous_secret']);
  // Which key sealed a value only opening it tells: with a previous key, every row is looked at.
  if (!secrets.rotating) {
    query = query.where((eb) =>
      eb.or([
        eb('secret', 'not like', `${SEALED}%`),
        eb.and([eb('previous_secret', 'is not', null), eb('previous_secret', 'not like', `${SEALED}%`)]),
      ]),
    );
  }
  let changed = 0;
  for (const row of await query.execute()) {
    const secret = secrets.reseal(row.secret, row.id);
    const previous = row.previous_secret === null ? undefined : secrets.reseal(row.previous_secret, row.id);
    if (secret === undefined && previous === undefined) continue;
    const result = await db
      .updateTable('webhook_endpoints')
      .set({ secret: secret ?? row.secret, previous_secret: previous ?? row.previous_secret })
      .where('id', '=', row.id)
      .where('secret', '=', row.secret)
      .where('previous_secret', 'is not distinct from', row.previous_secret)
      .executeTakeFirst();
    changed += Number(result.numUpdatedRows);
  }
  return changed;
}
