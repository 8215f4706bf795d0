// Timestamps leave the service as ISO 8601 UTC with milliseconds (DESIGN.md §5).

export function iso(value: Date | string): string;
export function iso(value: Date | string | null | undefined): string | null;
export function iso(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/**
 * Whether `text` starts with a day that exists, as `YYYY-MM-DD`. Date.parse is lenient (it takes
 * 2030-02-30 as 2 March), so the day must survive the round trip; and there is no year 0000 (nor
 * in PostgreSQL, which refuses it).
 */
export function startsWithCalendarDate(text: string): boolean {
  const day = text.slice(0, 10);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || day.startsWith('0000')) return false;
  const time = Date.parse(`${day}T00:00:00.000Z`);
  return !Number.isNaN(time) && new Date(time).toISOString().slice(0, 10) === day;
}
