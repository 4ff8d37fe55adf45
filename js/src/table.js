// A Markdown table streamed a row at a time (markdown.js: StreamingMarkdown).
//
// A table is one block: with no blank line inside it, the stable prefix cannot end in it, so a
// table of thousands of rows would be drawn whole on every frame (seconds of a blocked page). Once
// the tail holds a table that markdown-it draws alone as it draws it in place (checked with one
// render of each), the table's new complete rows are drawn by themselves (its header and
// delimiter row, then those rows) and appended to its body: markdown-it draws a row from that
// row's line and the header's columns and alignments only. The table ends where markdown-it ends
// it: at a blank line, at a line that starts another block (the rows drawn say where), or where
// its rows have made up more than markdown-it's limit of missing cells (counted over the whole
// table here, as markdown-it counts it). Anything else unexpected (a line markdown-it reads as two
// rows) gives the table back to the plain way: its tail drawn whole.

/** markdown-it's most cells a table's rows may leave missing (rules_block/table: MAX_AUTOCOMPLETED_CELLS) */
export const MAX_AUTOCOMPLETED = 65536;

// a delimiter row: cells of dashes with optional colons, between optional pipes
const DELIMITER = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

/**
 * The start of the first line in `text[from, to)` that a delimiter row follows (a table's header
 * line, with a pipe in it), both lines complete, at or after `after`; -1 when there is none.
 */
export function findTable(text, from, to, after = from) {
  let pos = from;
  let prev = -1; // start of the previous line, when it holds a pipe
  while (pos < to) {
    const nl = text.indexOf("\n", pos);
    if (nl < 0 || nl >= to) break;
    const line = text.slice(pos, nl);
    if (prev >= after && DELIMITER.test(line) && line.includes("-")) return prev;
    prev = line.includes("|") ? pos : -1;
    pos = nl + 1;
  }
  return -1;
}

/**
 * The cells markdown-it reads in a table row's line: its pieces between pipes (a pipe right after a
 * backslash is no separator: markdown-it's escapedSplit), an empty first and last piece dropped.
 */
export function cellCount(line) {
  const s = line.trim();
  const pipe = (i) => s.charCodeAt(i) === 124 && (i === 0 || s.charCodeAt(i - 1) !== 92);
  let n = 1;
  for (let i = 0; i < s.length; i++) if (pipe(i)) n++;
  if (pipe(0)) n--;
  if (n > 0 && s.length && pipe(s.length - 1)) n--;
  return n;
}

/** A table being streamed: its DOM (`nodes`, the tail's), and how far its rows are drawn. */
export class TableStream {
  /**
   * The table whose header line starts at `at` in `text` (the tail starts at `from`), when
   * markdown-it draws what comes before it and it, each alone, as it draws them together; else null.
   * `render(src, env)` gives markdown-it's HTML, `fragment(html)` a sanitized DocumentFragment.
   */
  static enter(text, from, at, render, fragment, env) {
    const end = text.lastIndexOf("\n") + 1;
    const prefixHTML = render(text.slice(from, at), env);
    const bodyStart = text.indexOf("\n", text.indexOf("\n", at) + 1) + 1;
    const headHTML = render(text.slice(at, bodyStart), env);
    if (!headHTML.startsWith("<table>\n") || !headHTML.endsWith("</table>\n") || headHTML.indexOf("<table>", 1) >= 0) return null;
    const t = new TableStream(at, text.slice(at, bodyStart), headHTML, prefixHTML, render, fragment);
    t.done = bodyStart;
    const rows = t.draw(text.slice(bodyStart, end), env);
    if (rows === null || rows.ended) return null; // (a table already ended is drawn the plain way)
    if (rows.html) t.rows.push(rows.html);
    if (prefixHTML + t.html("") !== render(text.slice(from, end), env)) return null;
    const frag = fragment(prefixHTML + t.html(""));
    t.nodes = Array.from(frag.childNodes);
    t.table = frag.lastElementChild;
    t.tbody = t.table.querySelector("tbody");
    t.done = end;
    return { stream: t, frag };
  }

  constructor(at, head, headHTML, prefixHTML, render, fragment) {
    this.at = at; // where its header line starts in the text
    this.head = head; // the header line and the delimiter row
    this.open = headHTML.slice(0, -"</table>\n".length); // <table>, its head
    this.prefixHTML = prefixHTML;
    this.render = render;
    this.fragment = fragment;
    this.columns = (headHTML.match(/<th[ >]/g) || []).length;
    this.rows = []; // HTML of the rows drawn, a piece per draw
    this.missing = 0; // cells the rows left missing so far (markdown-it's running count)
    this.done = 0; // where the rows drawn end in the text
    this.nodes = [];
    this.table = null;
    this.tbody = null;
  }

  /**
   * Draw the complete lines of `text` after the rows drawn (all of it when `finished`). Returns
   * the index where the table ends when it has ended, -1 while it goes on, or null when the table
   * is to be drawn the plain way again.
   */
  advance(text, finished, env) {
    const end = finished ? text.length : text.lastIndexOf("\n") + 1;
    if (end <= this.done) return finished ? text.length : -1;
    let src = text.slice(this.done, end);
    if (finished && !src.endsWith("\n")) src += "\n";
    const drawn = this.draw(src, env);
    if (drawn === null) return null;
    if (drawn.html) this.append(drawn.html);
    this.done += drawn.length;
    if (drawn.ended) return this.done;
    return finished ? text.length : -1;
  }

  /**
   * The rows of `src` (complete lines) as markdown-it draws them after this table's rows:
   * {html, length: the characters they take, ended: whether the table ends after them}, or null.
   */
  draw(src, env) {
    const lines = [];
    const gaps = []; // the cells each line leaves missing (fewer than none: cells beyond the header's)
    let pos = 0;
    let ended = false;
    let missing = this.missing;
    while (pos < src.length) {
      const nl = src.indexOf("\n", pos);
      const line = src.slice(pos, nl);
      if (!line.trim()) {
        ended = true;
        break;
      }
      const gap = this.columns - cellCount(line);
      missing += gap;
      if (missing > MAX_AUTOCOMPLETED) {
        ended = true;
        break;
      }
      lines.push(line);
      gaps.push(gap);
      pos = nl + 1;
    }
    // markdown-it counts the missing cells from 0 in each render: lines whose count would pass
    // its limit there (rows with extra cells made the table's count smaller) are drawn apart
    let html = "";
    let length = 0;
    for (let i = 0; i < lines.length; ) {
      let local = 0;
      let j = i;
      while (j < lines.length && local + gaps[j] <= MAX_AUTOCOMPLETED) local += gaps[j++];
      if (j === i) j = i + 1;
      const part = lines.slice(i, j);
      const out = this.render(this.head + part.join("\n") + "\n", env);
      const rows = this.rowsOf(out);
      if (rows === null || rows.count > part.length) return null; // (a lone "\r": two lines to markdown-it)
      html += rows.html;
      for (let k = 0; k < rows.count; k++) {
        length += part[k].length + 1;
        this.missing += gaps[i + k];
      }
      if (rows.count < part.length) return { html, length, ended: true }; // a line that starts another block
      if (rows.rest) return null;
      i = j;
    }
    return { html, length, ended };
  }

  // {html, count, rest} of the rows in markdown-it's HTML of the head and rows, or null
  rowsOf(out) {
    if (!out.startsWith(this.open)) return null;
    let at = this.open.length;
    let html = "";
    if (out.startsWith("<tbody>\n", at)) {
      const close = out.indexOf("</tbody>\n</table>\n", at);
      if (close < 0) return null;
      html = out.slice(at + "<tbody>\n".length, close);
      at = close + "</tbody>\n".length;
    }
    if (!out.startsWith("</table>\n", at)) return null;
    const count = html.split("<tr>\n").length - 1;
    return { html, count, rest: out.length > at + "</table>\n".length };
  }

  // the rows' HTML appended to the table's body (made when the table had no row yet)
  append(html) {
    const frag = this.fragment(this.open + "<tbody>\n" + html + "</tbody>\n</table>\n");
    const body = frag.querySelector("tbody");
    if (!this.tbody) { // after the head and its "\n", as markdown-it writes it
      this.tbody = body;
      this.table.appendChild(body);
      this.table.appendChild(this.table.ownerDocument.createTextNode("\n"));
    } else {
      const nodes = Array.from(body.childNodes);
      if (nodes.length && nodes[0].nodeType === 3) nodes.shift(); // ("\n" after <tbody>: the body has one)
      for (const n of nodes) this.tbody.appendChild(n);
    }
    this.rows.push(html);
  }

  /** markdown-it's HTML of what came before the table (unless `prefix` given) and the table. */
  html(prefix = this.prefixHTML) {
    const rows = this.rows.join("");
    return prefix + this.open + (rows ? "<tbody>\n" + rows + "</tbody>\n" : "") + "</table>\n";
  }
}
