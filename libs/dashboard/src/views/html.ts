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

/**
 * A table of rows under column headers. On a phone (layout.view.ts) each
 * row becomes a card, every cell after its column's name (data-label), so
 * the page never scrolls sideways; the box around it scrolls instead of the
 * page should a cell still not fit. A column without a title (a row's
 * buttons) gets one for screen readers.
 */
export function table(columns: string[], rows: string[][], empty = 'nothing here'): string {
  if (!rows.length) return `<p class="dim">${esc(empty)}</p>`;
  const head = columns.map((c) => `<th scope="col">${c ? esc(c) : '<span class="sr-only">actions</span>'}</th>`).join('');
  return `<div class="scroll"><table class="cards"><thead><tr>${head}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c, i) => `<td data-label="${esc(columns[i] ?? '')}">${c}</td>`).join('')}</tr>`)
    .join('')}</tbody></table></div>`;
}

/** A two-column table of facts, each row headed by its name (a job's fields). */
export function factsTable(facts: [string, string][], className = ''): string {
  return `<div class="scroll"><table${className ? ` class="${esc(className)}"` : ''}>${facts
    .map(([k, v]) => `<tr><th scope="row">${esc(k)}</th><td>${v}</td></tr>`)
    .join('')}</table></div>`;
}
