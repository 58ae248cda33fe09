/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json', diagnostics: { ignoreCodes: [151002] } }],
  },
  moduleNameMapper: {
    '^@stampeded/nestjs$': '<rootDir>/libs/stampeded/src/index.ts',
    '^@stampeded/nestjs/internal$': '<rootDir>/libs/stampeded/src/internal.ts',
    '^@stampeded/nestjs/internal-runtime$': '<rootDir>/libs/stampeded/src/internal-runtime.ts',
    '^@stampeded/testing$': '<rootDir>/libs/testing/src/index.ts',
    '^@stampeded/dashboard$': '<rootDir>/libs/dashboard/src/index.ts',
    '^@stampeded/dashboard/inspector$': '<rootDir>/libs/dashboard/src/inspector/index.ts',
    '^@stampeded/dashboard/internal$': '<rootDir>/libs/dashboard/src/internal.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  testMatch: ['<rootDir>/test/**/*.e2e-spec.ts', '<rootDir>/libs/**/src/**/*.spec.ts', '<rootDir>/apps/**/src/**/*.spec.ts'],
  globalSetup: '<rootDir>/test/setup/global-setup.mjs',
  globalTeardown: '<rootDir>/test/setup/global-teardown.mjs',
  testTimeout: 60_000,
  maxWorkers: 2,
  modulePathIgnorePatterns: ['<rootDir>/.*/dist/'],
};
