// The paths of an app's files: the shape every stored path has, the stricter checks a committed
// path passes, and the files cursor, which is a path.
import { characterCount } from '../../lib/text.js';
import { ValidationError } from '../errors.js';
import { encodeCursor, foreignCursor } from '../pagination.js';

/** The longest file path, in characters (code points), as sent and as stored (NFC). */
export const MAX_PATH_LENGTH = 200;

/** Control (Cc), format (Cf: zero-width, bidi, BOM) and line or paragraph separator characters. */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** A path is relative and slash-separated, without empty, `.` or `..` segments or backslashes. */
function hasBadShape(path: string): boolean {
  return path.includes('\\') || path.split('/').some((s) => s === '' || s === '.' || s === '..');
}

/** The path's shape as any stored path has it; a cursor is held to this. */
function checkPath(path: string, param: string): void {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point.
  if (/[\u0000-\u001f\u007f-\u009f\\]/.test(path))
    throw new ValidationError(param, `${param} contains a forbidden character.`);
  if (hasBadShape(path)) {
    throw new ValidationError(param, `${param} must be a relative path without empty, '.' or '..' segments.`);
  }
}

/**
 * A committed path, already in NFC (the form stored and compared). On top of the shape: no
 * character that does not show (a bidi override or a BOM makes two names look alike), and no
 * segment that reads as `.` or `..` once compatibility characters are folded (NFKC turns
 * `．．` into `..`), as a consumer that folds them would walk out of the app.
 */
export function checkCommittedPath(path: string, param: string): void {
  const invisible = INVISIBLE.exec(path)?.[0];
  if (invisible !== undefined) {
    const code = `U+${invisible.codePointAt(0)?.toString(16).toUpperCase().padStart(4, '0')}`;
    throw new ValidationError(param, `${param} contains ${code}, a control, format or line separator character.`);
  }
  checkPath(path, param);
  const folded = path.normalize('NFKC');
  if (hasBadShape(folded)) {
    throw new ValidationError(
      param,
      `${param} reads as '${folded}' once compatibility characters are folded (NFKC): ` +
        "a path cannot have empty, '.' or '..' segments or backslashes.",
    );
  }
  // NFC can lengthen a path (U+2ADC becomes two characters); the stored form must fit too.
  if (characterCount(path) > MAX_PATH_LENGTH) {
    throw new ValidationError(param, `${param} is longer than ${MAX_PATH_LENGTH} characters once normalised to NFC.`);
  }
}

/** The path a files cursor stands for; a cursor this service could not have issued is a `validation_error`. */
export function decodePathCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const path = Buffer.from(cursor, 'base64url').toString('utf8');
  // Not base64url, or not UTF-8: it does not encode back to itself.
  if (encodeCursor(path) !== cursor || characterCount(path) > MAX_PATH_LENGTH) throw foreignCursor();
  try {
    checkPath(path, 'cursor');
  } catch {
    throw foreignCursor();
  }
  return path;
}
