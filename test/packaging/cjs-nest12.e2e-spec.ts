// A CommonJS app on Nest 12 and TypeORM 1, installing the packed packages
// with npm from the registry (test/fixtures/cjs-app/nest12). Its sibling,
// cjs-nest11.e2e-spec.ts, is the same app on Nest 11.
import { describeCjsApp } from './cjs-app.js';

describeCjsApp(12, /^1\./, false);
