// The unit specs beside the sources (*.spec.ts), alone: no build and no
// PostgreSQL, so no global setup. `npm run test:unit`; `npm test` runs them
// too, with everything else (jest.config.js).
import base from './jest.config.js';

/** @type {import('jest').Config} */
export default {
  ...base,
  testMatch: ['<rootDir>/libs/**/src/**/*.spec.ts', '<rootDir>/apps/**/src/**/*.spec.ts'],
  globalSetup: undefined,
  globalTeardown: undefined,
};
