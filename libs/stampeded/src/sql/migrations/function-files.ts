import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { FUNCTION_FORM_WITHOUT_BASE } from '../../stampeded.messages.js';
import { FUNCTION_BODY_CHECKS, RECHOOSE_FORMS, RECORD_FUNCTION, RECORDED_FUNCTIONS, SET_FUNCTION_BODY_CHECKS } from './runner.sql.js';
import type { SqlRunner } from './migrations.js';
import { withBlocks } from './function-blocks.js';

/** A function's file, and the checksum of its text that the install records when it applies it. */
export interface FunctionFile {
  name: string;
  checksum: string;
}

/**
 * One function file's text, and the older server versions it has a form of
 * its own for: `NAME.sql` is the form for every server without one, and
 * `NAME.preNN.sql` the form for a server older than PostgreSQL NN (of
 * several, the one with the lowest NN above the server's major). A
 * pre-form is written in the older versions' SQL, so it also runs on the
 * newer ones: a server upgraded under an install keeps working with what was
 * installed until the next migrate switches forms.
 */
export interface FunctionSource extends FunctionFile {
  text: string;
  /** By the major the form is for servers below: 18 for NAME.pre18.sql. */
  before: ReadonlyMap<number, { text: string; checksum: string }>;
}

const FUNCTIONS_DIR = new URL('../functions/', import.meta.url);
const PRE_FORM = /^(.+)\.pre(\d+)\.sql$/;

export const checksumOf = (text: string) => createHash('sha256').update(text).digest('hex');

let functionFiles: readonly FunctionSource[] | undefined;
/** Every function file shipped, by name, with its forms for older servers. */
export function loadFunctionFiles(): readonly FunctionSource[] {
  if (functionFiles) return functionFiles;
  const files = readdirSync(FUNCTIONS_DIR)
    .filter((f) => f.endsWith('.sql'))
    .sort();
  const byName = new Map<string, FunctionSource>();
  for (const f of files.filter((f) => !PRE_FORM.test(f))) {
    const text = withBlocks(readFileSync(new URL(f, FUNCTIONS_DIR), 'utf8'), f);
    byName.set(f.slice(0, -'.sql'.length), { name: f.slice(0, -'.sql'.length), text, checksum: checksumOf(text), before: new Map() });
  }
  for (const f of files) {
    const m = PRE_FORM.exec(f);
    if (!m) continue;
    const base = byName.get(m[1]);
    if (!base) throw new Error(FUNCTION_FORM_WITHOUT_BASE(f, m[1]));
    const text = withBlocks(readFileSync(new URL(f, FUNCTIONS_DIR), 'utf8'), f);
    (base.before as Map<number, { text: string; checksum: string }>).set(Number(m[2]), { text, checksum: checksumOf(text) });
  }
  functionFiles = [...byName.values()];
  return functionFiles;
}

/** Each function's form for a server of this version (server_version_num). */
export function functionFilesFor(serverVersionNum: number): (FunctionFile & { text: string })[] {
  const major = Math.floor(serverVersionNum / 10000);
  return loadFunctionFiles().map((f) => {
    const below = [...f.before.keys()].filter((n) => major < n).sort((a, b) => a - b)[0];
    const form = below === undefined ? f : f.before.get(below)!;
    return { name: f.name, text: form.text, checksum: form.checksum };
  });
}

/**
 * Whether a recorded checksum is a form that runs on this server: its own
 * form, or a form for older servers (written in their SQL, which the newer
 * ones run too). The first is what migrate installs; the second is what a
 * server upgraded under the install still has until then.
 */
export function runsOn(f: FunctionSource, checksum: unknown, serverVersionNum: number): boolean {
  const own = functionFilesFor(serverVersionNum).find((g) => g.name === f.name)!;
  if (checksum === own.checksum) return true;
  const major = Math.floor(serverVersionNum / 10000);
  return [...f.before.entries()].some(([n, form]) => n <= major && form.checksum === checksum);
}

/**
 * Creates or replaces each function whose form for this server differs from
 * what the install recorded: a changed file, or a server whose version now
 * takes another form. Bodies are not checked at creation (as pg_dump
 * restores them): a function may call one whose file sorts after its own.
 */
export async function applyFunctions(run: SqlRunner, serverVersionNum: number): Promise<string[]> {
  const recorded = new Map((await run(RECORDED_FUNCTIONS)).map((r) => [r.name, r.checksum]));
  const forms = functionFilesFor(serverVersionNum);
  // Chosen again for this server, the same form or another.
  await run(RECHOOSE_FORMS, [serverVersionNum, forms.map((f) => f.name)]);
  const changed = forms.filter((f) => recorded.get(f.name) !== f.checksum);
  if (!changed.length) return [];
  const [{ previous }] = await run(FUNCTION_BODY_CHECKS);
  await run(SET_FUNCTION_BODY_CHECKS, ['off']);
  for (const f of changed) {
    await run(f.text);
    await run(RECORD_FUNCTION, [f.name, f.checksum, serverVersionNum]);
  }
  await run(SET_FUNCTION_BODY_CHECKS, [previous]);
  return changed.map((f) => f.name);
}
