// tsc does not copy non-TypeScript files; the migrations' .sql files ship in
// dist/ beside the compiled code that reads them. npm packs a LICENSE only from
// the package's own folder, so each shipped package gets a copy of the
// repository's one.
import { cpSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function copySql(from, to) {
  for (const entry of readdirSync(from)) {
    const source = join(from, entry);
    const target = join(to, entry);
    if (statSync(source).isDirectory()) copySql(source, target);
    else if (entry.endsWith('.sql')) cpSync(source, target);
  }
}

for (const lib of ['libs/stampeded']) copySql(join(lib, 'src'), join(lib, 'dist'));
for (const lib of ['libs/stampeded', 'libs/testing', 'libs/dashboard']) cpSync('LICENSE', join(lib, 'LICENSE'));
