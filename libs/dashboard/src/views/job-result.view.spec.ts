import { FINISHED_STATES, JOB_STATES } from '@stampeded/nestjs/internal';
import { noResultText } from './job-result.view.js';

describe("a job's missing result, by state", () => {
  it('promises one only while the job has not finished, by the core own list of finished states', () => {
    for (const state of JOB_STATES) {
      const text = noResultText(state);
      if (FINISHED_STATES.has(state)) expect(text).not.toMatch(/yet|when the job completes/);
      else expect(text).toBe('none yet: stored when the job completes');
      expect(text).toBeTruthy();
    }
    expect(noResultText('discarded')).toMatch(/discarded/);
    expect(noResultText('cancelled')).toMatch(/cancelled/);
  });
});
