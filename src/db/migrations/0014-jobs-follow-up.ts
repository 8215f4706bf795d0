// A request for a job whose key a running job holds can ask that job to run once more after it
// ends (`follow_up`), where joining it would come too late: a source's sync that has already
// written its result, say, and is only finishing. The flag is on the running job's own row, so the
// follow-up can never run alongside it, and a second request sets it again: one follow-up at most.
import type { Migration } from '../migrate.js';

export const jobsFollowUp: Migration = {
  name: '0014-jobs-follow-up',
  statements: ['alter table jobs add column follow_up boolean not null default false'],
};
