// tsc does not copy non-TypeScript files; the migrations' and functions'
// .sql files ship in dist/ beside the compiled code that reads them. The
// runner reads every file in dist/sql/functions/, so a file removed from src
// is removed from dist first. npm packs a LICENSE only from the package's own
// folder, so each shipped package gets a copy of the repository's one.
import { cpSync, existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

function removeSql(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) removeSql(path);
    else if (entry.endsWith('.sql')) rmSync(path);
  }
}

function copySql(from, to) {
  for (const entry of readdirSync(from)) {
    const source = join(from, entry);
    const target = join(to, entry);
    if (statSync(source).isDirectory()) copySql(source, target);
    else if (entry.endsWith('.sql')) cpSync(source, target);
  }
}

for (const lib of ['libs/stampeded']) {
  removeSql(join(lib, 'dist'));
  copySql(join(lib, 'src'), join(lib, 'dist'));
}
for (const lib of ['libs/stampeded', 'libs/testing', 'libs/dashboard']) cpSync('LICENSE', join(lib, 'LICENSE'));
