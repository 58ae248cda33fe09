// A CommonJS app on Nest 11 and TypeORM 0.3, installing the packed packages
// with npm from the registry (test/fixtures/cjs-app/nest11). Its sibling,
// cjs-nest12.e2e-spec.ts, is the same app on Nest 12. This one also runs the
// app's own jest test, in Jest's ESM mode.
import { describeCjsApp } from './cjs-app.js';

describeCjsApp(11, /^0\.3\./, true);
