// The operator tokens of the control plane, stored only as SHA-256 hashes.
import type { Db } from '../../db/index.js';
import { newId, newSecret, sha256Hex } from '../../lib/ids.js';

/** Creates an operator token (control plane); the token is in this answer only. */
export async function createOperatorToken(db: Db): Promise<string> {
  const token = newSecret('wso');
  await db
    .insertInto('operator_tokens')
    .values({ id: newId(), token_hash: sha256Hex(token) })
    .execute();
  return token;
}

export async function hasOperatorToken(db: Db, tokenHash: string): Promise<boolean> {
  const row = await db
    .selectFrom('operator_tokens')
    .select('id')
    .where('token_hash', '=', tokenHash)
    .executeTakeFirst();
  return row !== undefined;
}

/** Deletes every stored (generated) operator token; answers how many there were. */
export async function retireOperatorTokens(db: Db): Promise<number> {
  const result = await db.deleteFrom('operator_tokens').executeTakeFirst();
  return Number(result.numDeletedRows);
}

export async function countOperatorTokens(db: Db): Promise<number> {
  const row = await db.selectFrom('operator_tokens').select(db.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}
