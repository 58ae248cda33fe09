// Flat config: ESLint's and typescript-eslint's recommended rules, without
// type information, so that `npm run lint` takes seconds.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/', '**/node_modules/', 'bench/results/', 'bench/out/', '.test-results/', 'coverage/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // Rows from pg and the JSON of jobs' args and meta are Record<string, any>
      // by design: their shape is the schema's, checked by the tests against a real database.
      '@typescript-eslint/no-explicit-any': 'off',
      // A leading underscore marks a name left unused on purpose (an argument a
      // handler must accept, a key a rest destructuring drops).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
);
