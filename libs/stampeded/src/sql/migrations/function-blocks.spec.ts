import { withBlocks } from './function-blocks.js';
import { loadFunctionFiles } from './function-files.js';

describe('withBlocks', () => {
  it("writes a block's SQL where a function names it, without its header, its lines indented to the name", () => {
    const text = withBlocks('SELECT 1\n  WHERE x AND {{ordering_turn}}\n  LIMIT 1', 'example.sql');
    const lines = text.split('\n');
    expect(lines[1]).toBe('  WHERE x AND (c.ordering_key IS NULL OR (');
    // Every following line of the block starts at least where its name stood.
    const blockLines = lines.slice(2, -1);
    expect(blockLines.length).toBeGreaterThan(10);
    for (const line of blockLines) expect(line.startsWith(' '.repeat('  WHERE x AND '.length))).toBe(true);
    expect(lines.at(-1)).toBe('  LIMIT 1');
    expect(text).not.toContain('Written into each claim');
  });

  it('refuses a block that has no file, naming the function file', () => {
    expect(() => withBlocks('SELECT {{no_such_block}}', 'stampeded_example.sql')).toThrow(/stampeded_example\.sql.*\{\{no_such_block\}\}/);
  });

  it('leaves no block unwritten in any function the runner installs', () => {
    for (const f of loadFunctionFiles()) {
      expect({ name: f.name, placeholders: f.text.match(/\{\{\w+\}\}/g) }).toEqual({ name: f.name, placeholders: null });
      for (const form of f.before.values()) expect(form.text).not.toMatch(/\{\{\w+\}\}/);
    }
  });
});
