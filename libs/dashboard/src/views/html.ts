/** Escapes text for HTML content and attribute values: every value a page shows goes through here. */
export function esc(value: unknown): string {
  const text =
    value === null || value === undefined
      ? ''
      : value instanceof Date
        ? value.toISOString()
        : typeof value === 'object'
          ? JSON.stringify(value)
          : String(value);
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** A value for a table cell: a dash for nothing. */
export function show(value: unknown): string {
  return value === null || value === undefined || value === '' ? '<span class="dim">-</span>' : esc(value);
}

export function query(params: Record<string, unknown>): string {
  const entries = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '');
  return entries.length ? `?${new URLSearchParams(entries.map(([k, v]): [string, string] => [k, String(v)])).toString()}` : '';
}

export function table(columns: string[], rows: string[][], empty = 'nothing here'): string {
  if (!rows.length) return `<p class="dim">${esc(empty)}</p>`;
  return `<table><thead><tr>${columns.map((c) => `<th>${esc(c)}</th>`).join('')}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`)
    .join('')}</tbody></table>`;
}
