import { POLICY_FIELDS, policyFromInput } from './queue-policy.js';

describe('policyFromInput', () => {
  it('reads a form: numbers as numbers, empty or none as no limit, the rest as typed for the validation to quote', () => {
    expect(policyFromInput({ maxRunning: ' 12 ', maxWaitSecs: '', _csrf: 't', _back: '/x' }, POLICY_FIELDS)).toEqual({ maxRunning: 12, maxWaitSecs: null });
    expect(policyFromInput({ maxRunning: 'none', maxWaitSecs: '1.5' }, POLICY_FIELDS)).toEqual({ maxRunning: null, maxWaitSecs: 1.5 });
    expect(policyFromInput({ maxRunning: 'ten', maxWaitSecs: '-3' }, POLICY_FIELDS)).toEqual({ maxRunning: 'ten', maxWaitSecs: -3 });
  });

  it('passes a JSON body through whole, so that a misspelt key reaches the validation', () => {
    expect(policyFromInput({ maxrunning: 3, maxWaitSecs: null })).toEqual({ maxrunning: 3, maxWaitSecs: null });
    expect(policyFromInput(undefined)).toEqual({});
  });
});
