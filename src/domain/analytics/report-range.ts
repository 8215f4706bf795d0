// The range of a dashboard report: whole UTC days, the last 7, 30 or 90 ending today or a custom
// range of at most MAX_RANGE_DAYS, both ends included.
import { startsWithCalendarDate } from '../../lib/time.js';
import { MissingParameterError, ValidationError } from '../errors.js';

export const REPORT_TYPES = ['last_7_days', 'last_30_days', 'last_90_days', 'custom'] as const;
export type ReportType = (typeof REPORT_TYPES)[number];
/** The longest custom range, in days (both ends included). */
export const MAX_RANGE_DAYS = 366;
export const DAY_MS = 86_400_000;

const PRESET_DAYS: Record<Exclude<ReportType, 'custom'>, number> = {
  last_7_days: 7,
  last_30_days: 30,
  last_90_days: 90,
};

export interface RangeInput {
  report_type: ReportType;
  start_date?: string | undefined;
  end_date?: string | undefined;
}

function parseDate(value: string, param: string): number {
  if (value.length !== 10 || !startsWithCalendarDate(value)) {
    throw new ValidationError(param, `${param} must be a calendar date (YYYY-MM-DD).`);
  }
  return Date.parse(`${value}T00:00:00.000Z`);
}

const day = (time: number) => new Date(time).toISOString().slice(0, 10);

/** The report's first and last UTC day, both included. */
export function resolveRange(input: RangeInput, now: Date = new Date()): { start: string; end: string } {
  if (input.report_type !== 'custom') {
    for (const param of ['start_date', 'end_date'] as const) {
      if (input[param] !== undefined) {
        throw new ValidationError(param, `${param} is only taken with report_type 'custom'.`);
      }
    }
    const today = Date.parse(`${now.toISOString().slice(0, 10)}T00:00:00.000Z`);
    return { start: day(today - (PRESET_DAYS[input.report_type] - 1) * DAY_MS), end: day(today) };
  }
  if (input.start_date === undefined) throw new MissingParameterError('start_date');
  if (input.end_date === undefined) throw new MissingParameterError('end_date');
  const start = parseDate(input.start_date, 'start_date');
  const end = parseDate(input.end_date, 'end_date');
  if (end < start) throw new ValidationError('end_date', 'end_date must not be before start_date.');
  const days = (end - start) / DAY_MS + 1;
  if (days > MAX_RANGE_DAYS) {
    throw new ValidationError(
      'end_date',
      `The range covers ${days} days; at most ${MAX_RANGE_DAYS} are allowed. Use a shorter range.`,
    );
  }
  return { start: day(start), end: day(end) };
}
