import { readFileSync } from 'node:fs';
import { FUNCTION_BLOCK_MISSING } from '../../stampeded.messages.js';

const BLOCKS_DIR = new URL('../functions/blocks/', import.meta.url);
/** `{{name}}` in a function file: the text of functions/blocks/name.sql goes there. */
const PLACE = /\{\{(\w+)\}\}/g;

const blocks = new Map<string, string>();
function block(name: string, file: string): string {
  let text = blocks.get(name);
  if (text === undefined) {
    let source: string;
    try {
      source = readFileSync(new URL(`${name}.sql`, BLOCKS_DIR), 'utf8');
    } catch {
      throw new Error(FUNCTION_BLOCK_MISSING(file, name));
    }
    // Its header says what the block is and why; the functions it goes into need only the SQL.
    const lines = source.replace(/\s+$/, '').split('\n');
    let start = 0;
    while (start < lines.length && (lines[start].startsWith('--') || lines[start].trim() === '')) start++;
    text = lines.slice(start).join('\n');
    blocks.set(name, text);
  }
  return text;
}

/**
 * A function file's text as it is installed: each `{{name}}` replaced by the
 * SQL of functions/blocks/name.sql, its lines after the first indented to
 * where the name stood. A piece of SQL that several functions share inside
 * their statements (the claims' turn check, their update of the claimed
 * rows) is written once this way: as a function of its own, called from
 * theirs, it cost the claims more (NOTES.md, "One claim, three ways").
 */
export function withBlocks(text: string, file: string): string {
  return text.replace(PLACE, (_place: string, name: string, offset: number) => {
    const column = offset - (text.lastIndexOf('\n', offset - 1) + 1);
    return block(name, file)
      .split('\n')
      .map((line, i) => (i > 0 && line ? ' '.repeat(column) + line : line))
      .join('\n');
  });
}
