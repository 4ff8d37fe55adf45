import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { StreamingMarkdown, renderMarkdownHTML, htmlToFragment } from "../src/markdown.js";
import { cellCount, findTable, MAX_AUTOCOMPLETED, TableStream } from "../src/table.js";
import { useMathEngine } from "../src/math.js";
import * as katexEngine from "../src/katex.js";

useMathEngine(katexEngine);

function setup() {
  const { document } = new JSDOM("<!doctype html><html><body></body></html>").window;
  const el = document.createElement("div");
  document.body.appendChild(el);
  return { doc: document, el, md: new StreamingMarkdown(el) };
}

// a seeded generator (mulberry32)
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// `text` appended in pieces of 1..maxPiece characters, each drawn; then finished
function stream(text, rand, maxPiece = 12) {
  const s = setup();
  let pos = 0;
  while (pos < text.length) {
    const n = 1 + Math.floor(rand() * maxPiece);
    s.md.append(text.slice(pos, pos + n));
    pos += n;
    s.md.flush(false);
  }
  s.md.flush(true);
  const ref = s.doc.createElement("div");
  ref.appendChild(htmlToFragment(s.doc, renderMarkdownHTML(text)));
  return { ...s, ref };
}

const CELLS = ["a", "**b**", "`c|d`", "x \\| y", "", " ", "$x^2$", "[l](https://example.com)", "é", "<b>no</b>", "12.5", "\\"];
const AFTER = ["", "\n", "\nafter\n", "# heading\n", "```\ncode\n```\n", "---\n", "> quote\n", "- item\n", "    indented\n",
  "1. one\n", "[r]: https://example.com\n", "plain line\n", "| lone | row |\n", "\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"];

function row(rand, columns) {
  const n = Math.max(0, columns + Math.floor(rand() * 5) - 2);
  const cells = Array.from({ length: n }, () => CELLS[Math.floor(rand() * CELLS.length)]);
  const lead = rand() < 0.8 ? "| " : "";
  const trail = rand() < 0.8 ? " |" : "";
  return (rand() < 0.1 ? "  " : "") + lead + cells.join(" | ") + trail;
}

function table(rand) {
  const columns = 1 + Math.floor(rand() * 5);
  const aligns = ["---", ":--", "--:", ":-:"];
  const head = "| " + Array.from({ length: columns }, (_, i) => `h${i}`).join(" | ") + " |";
  const delim = "|" + Array.from({ length: columns }, () => aligns[Math.floor(rand() * 4)]).join("|") + "|";
  const rows = Array.from({ length: Math.floor(rand() * 30) }, () => row(rand, columns));
  return [head, delim, ...rows].join("\n") + "\n";
}

function doc(rand) {
  const before = ["", "Intro paragraph.\n\n", "A paragraph the table interrupts:\n", "- a list item\n  ", "> ", "## Title\n\n"][Math.floor(rand() * 6)];
  let text = before + table(rand) + AFTER[Math.floor(rand() * AFTER.length)];
  if (rand() < 0.3) text = text.replace(/\n$/, ""); // (finished without a last newline)
  if (rand() < 0.05) text = text.replace("\n", "\r\n");
  if (rand() < 0.05) text = text.replace(/\| (\S+) \|\n(?!\|?-)/, "| $1 \r| x |\n"); // (a lone "\r" in a row: a line break to markdown-it)
  return text;
}

test("a table streamed in random pieces ends as markdown-it draws it whole (80 documents)", () => {
  for (let seed = 1; seed <= 80; seed++) {
    const rand = rng(seed);
    const text = doc(rand);
    const { el, ref } = stream(text, rand, 4 + Math.floor(rand() * 40));
    assert.equal(el.innerHTML, ref.innerHTML, `seed ${seed}: ${JSON.stringify(text)}`);
  }
});

test("a long table is drawn a row at a time: the rows drawn stay, and the table is not drawn whole again", () => {
  let text = "Here are the words:\n\n| # | word | score |\n|--:|:-----|:-----:|\n";
  for (let i = 0; i < 3000; i++) text += `| ${i} | w${i} **b** | ${(i % 97) / 10} |\n`;
  text += "\nThat is all.\n";
  const rand = rng(7);
  const s = setup();
  let pos = 0;
  let first = null;
  let flushes = 0;
  let tableFlushes = 0;
  while (pos < text.length) {
    const n = 1 + Math.floor(rand() * 120);
    s.md.append(text.slice(pos, pos + n));
    pos += n;
    s.md.flush(false);
    flushes++;
    if (s.md.table) tableFlushes++;
    if (!first) first = s.el.querySelector("tbody tr");
  }
  assert.ok(tableFlushes > flushes * 0.8, `drawn a row at a time in ${tableFlushes} of ${flushes} frames`);
  assert.ok(first && first.isConnected, "the first row drawn is still the one in the page");
  assert.equal(s.el.querySelectorAll("table").length, 1);
  assert.equal(s.el.querySelectorAll("tbody tr").length, 3000);
  s.md.flush(true);
  const ref = s.doc.createElement("div");
  ref.appendChild(htmlToFragment(s.doc, renderMarkdownHTML(text)));
  assert.equal(s.el.innerHTML, ref.innerHTML);
  assert.equal(s.md.stableHTML.join("") + s.md.tailHTML, renderMarkdownHTML(text));
  assert.ok(first.isConnected, "kept to the end");
});

// a table stream that keeps its rows' HTML only (no DOM: jsdom takes seconds over 65,536 cells)
class Bare extends TableStream {
  append(html) {
    this.rows.push(html);
  }
}

test("a streamed table's rows that leave cells missing end it where markdown-it does (its limit over the whole table)", () => {
  // 200 columns: a row of one cell leaves 199 missing; the limit comes after ~330 of them. Rows
  // with extra cells first make markdown-it's count negative, so that a later render alone would
  // pass it: those rows are drawn apart.
  const cols = (n, p) => "|" + Array.from({ length: n }, (_, i) => `${p}${i}`).join("|") + "|\n";
  const head = cols(200, "c") + "|" + "-|".repeat(200) + "\n";
  const bodies = [["| one |\n".repeat(400), true], [cols(300, "x").repeat(700) + "| one \\| still one |\n".repeat(400) + "|\n".repeat(5), false]];
  for (const [body, cut] of bodies) {
    const text = head + body + "after\n";
    const t = new Bare(0, head, renderMarkdownHTML(head), "", renderMarkdownHTML, null);
    t.done = head.length;
    // the rows of body 1 by 125 at a time (the count goes on over advances); those of body 2 in
    // two advances: the wide rows, then all the others (which markdown-it alone would cut)
    const stops = cut ? Array.from({ length: 40 }, (_, i) => head.length + 1000 * (i + 1)) : [head.length + body.indexOf("| one")];
    let end = -1;
    for (const pos of [...stops, text.length]) if (end === -1) end = t.advance(text.slice(0, pos), pos >= text.length, {});
    // (the line "after" is one more row of a table that goes on)
    assert.equal(end < text.length - "after\n".length, cut, cut ? "the limit ended the table before its last row" : "a table of 1,105 rows");
    assert.equal(t.html("") + renderMarkdownHTML(text.slice(end)), renderMarkdownHTML(text));
  }
  assert.equal(MAX_AUTOCOMPLETED, 65536);
});

test("cellCount reads a row's cells as markdown-it splits them", () => {
  const cases = { "| a | b |": 2, "a | b": 2, "|a|": 1, "|": 0, "||": 1, "| a \\| b |": 1, "a \\|": 1, "\\|": 1, "| a | b \\|": 2, "  | a |  ": 1, "x": 1 };
  for (const [line, n] of Object.entries(cases)) assert.equal(cellCount(line), n, line);
});

test("findTable finds a header line followed by a delimiter row, both complete", () => {
  const t = "Intro\n| a | b |\n|---|:-:|\n| 1 | 2 |\n";
  assert.equal(findTable(t, 0, t.length), 6);
  assert.equal(findTable(t, 0, t.length, 7), -1, "not before `after`");
  assert.equal(findTable("| a |\n|---", 0, 10), -1, "the delimiter row is not complete yet");
  assert.equal(findTable("Title\n---\n", 0, 10), -1, "a setext heading has no pipe");
});

test("a table in a list item is drawn the plain way (markdown-it draws it otherwise alone)", () => {
  const text = "- item\n  | a | b |\n  |---|---|\n  | 1 | 2 |\n  | 3 | 4 |\n";
  const s = setup();
  for (const ch of text) {
    s.md.append(ch);
    s.md.flush(false);
    assert.equal(s.md.table, null);
  }
  s.md.flush(true);
  const ref = s.doc.createElement("div");
  ref.appendChild(htmlToFragment(s.doc, renderMarkdownHTML(text)));
  assert.equal(s.el.innerHTML, ref.innerHTML);
});

test("a lone carriage return in a row (a line break to markdown-it) gives the table back to the plain way", () => {
  for (const text of ["| a | b |\n|---|---|\n| 1 | 2 |\n| 3 \r| 4 |\n| 5 | 6 |\n", "| a |\n|---|\n| 1 |\n|\r\n| 2 |\r| 3 |\n\nafter\n"]) {
    const { el, ref } = stream(text, rng(5), 3);
    assert.equal(el.innerHTML, ref.innerHTML, JSON.stringify(text));
  }
});

// Lines of every kind mixed at random: display formulas opening a block, inside a paragraph (where
// no formula starts: a PHP variable variable, bash's PID), after a list or quote marker, closed on
// their line or not; code fences (holding "$$" and blank lines; in list items and block quotes),
// tables, lists, quotes, headings.
const LINES = ["", "", "", "text here", "| a | b |", "|---|---|", "| 1 | 2 |", "|1|", "| x | y | z |", "- item", "1. one",
  "2) two", "   indented", "    code", "```", "~~~", "```php", "> quote", "# head", "---", "===", "$$", "$$", "$$ x $$",
  "$$ x = 1", "\\[", "\\]", "\\[ y", "z \\]", "  $$", "    $$", "> $$", "- $$", "$$x$$ y", "$$name = 'v';", "echo $$",
  "ps -p $$", "a $ b", "\\(q\\)", "x^2 $$", "a | b", "--- | ---", "[r]: http://x", "[r]", "  - sub", "\t tab", "*em*", "***",
  "| c |", "|:-:|", "2. x", "10. y", "> ```", "- ```", "  ```", "-", ">", "1.", "\\[x\\]", "$$\\", "> > $$", "$"];

test("random documents of mixed lines with formulas and fences, streamed in random pieces, end as a full render (600 documents)", () => {
  for (let seed = 1; seed <= 600; seed++) {
    const rand = rng(1000 + seed);
    const n = 3 + Math.floor(rand() * 28);
    const lines = Array.from({ length: n }, () => LINES[Math.floor(rand() * LINES.length)]);
    const text = lines.join("\n") + (rand() < 0.5 ? "\n" : "");
    const { el, ref } = stream(text, rand, 1 + Math.floor(rand() * 16));
    assert.equal(el.innerHTML, ref.innerHTML, `seed ${seed}: ${JSON.stringify(text)}`);
  }
});

test("a line opening a formula inside a paragraph hides no fence: the code block's blank line splits nothing", () => {
  const texts = [
    "In bash, the special parameter\n$$ expands to the PID of the shell:\n```bash\necho \"PID: $$\"\n\nps -p $$\n```\n\nThat is **all**.\n",
    "PHP has variable variables:\n$$name = 'value';\n```php\n$a = 'b';\n\n$$a = 'c';\n```\n\nDone.\n",
    "A bracket:\n\\[ not a formula here\n```\nx \\]\n\ny\n```\n\nEnd.\n",
  ];
  for (const text of texts) {
    const { el, ref } = stream(text, rng(3), 1);
    assert.equal(el.innerHTML, ref.innerHTML, JSON.stringify(text));
    assert.equal(el.querySelectorAll("pre").length, 1, "one code block");
  }
});

test("no table is drawn a row at a time inside a display formula not closed yet", () => {
  const s = setup();
  const text = "Intro.\n\n$$\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n$$\n\nAfter.\n";
  for (const ch of text) {
    s.md.append(ch);
    s.md.flush(false);
    assert.equal(s.md.table, null, JSON.stringify(s.md.text));
  }
  s.md.flush(true);
  const ref = s.doc.createElement("div");
  ref.appendChild(htmlToFragment(s.doc, renderMarkdownHTML(text)));
  assert.equal(s.el.innerHTML, ref.innerHTML);
  assert.equal(s.el.querySelectorAll("table").length, 0);
});

test("a fence in a list item or a block quote, ended by a line out of it, hides no split", () => {
  const texts = [
    "1. Step\n   ```bash\n   cmd\n```\n\nmore\n\n```\n\nAfter.\n",
    "$\n$$ x = 1\n- ```\n    $$\n$$\\\n\n[r]\n--- | ---\n\\[ y\n10. y\n*em*\necho $$\n\t tab\n===\n- item\n\n2. x\n",
    "|:-:|\n$$\n\n>\n\\(q\\)\n$$x$$ y\n|:-:|\n    code\n   indented\nx^2 $$\n$$\n> ```\n$$\n--- | ---\n--- | ---\n|---|---|\necho $$\n\t tab\n$$\necho $$\n\\[ y\n1.",
  ];
  for (const text of texts) {
    for (const piece of [1, 7]) {
      const { el, ref } = stream(text, rng(piece), piece);
      assert.equal(el.innerHTML, ref.innerHTML, JSON.stringify(text));
    }
  }
});
