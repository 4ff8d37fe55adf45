// Markdown for untrusted model output: markdown-it (html: false, linkify: false, images as their
// alt text, TeX math as MathML: math.js) → DOMPurify (returned as a DOM fragment, never re-serialized) → code blocks get a copy
// button, links open in a new tab with rel="noopener noreferrer".
//
// Streaming: `StreamingMarkdown` keeps a stable prefix rendered once and re-renders only the tail.
// The prefix ends at a blank line outside any fenced code block or display formula whose next line starts a new
// top-level block (not indented, not a list item), where splitting the source cannot change how
// markdown-it parses either side. When the text is finished and holds a reference-style link
// definition (which may serve a link in another piece), the concatenated HTML of the pieces is
// compared with one full render and the DOM replaced if they differ, so the final DOM is always
// that of a full render. A formula drawn while the math engine is not loaded yet shows its TeX
// (math.js); the whole text is drawn again once the engine is there.

import MarkdownIt from "markdown-it";
import createDOMPurify from "dompurify";
import { h } from "./util.js";
import { mathPlugin, requestMath, releaseMath } from "./math.js";
import { TableStream, findTable } from "./table.js";

let _md = null;
export function markdownIt() {
  if (_md) return _md;
  const md = new MarkdownIt({ html: false, linkify: false, typographer: false, breaks: false });
  // markdown-it's default validateLink already rejects javascript:, vbscript:, file: and data:
  // (except raster data:image). Keep it that way, and also refuse data:image/svg+xml explicitly.
  const validate = md.validateLink.bind(md);
  md.validateLink = (url) => validate(url) && !/^\s*data:image\/svg/i.test(url);
  // An image in Markdown is never loaded: a remote one would be fetched from wherever the model
  // points (a tracking pixel, or a URL carrying what the conversation holds). Its alt text stands
  // in, as in the static HTML (views/html.py). Images a model returns come as image items.
  md.renderer.rules.image = (tokens, idx, options, env, self) =>
    md.utils.escapeHtml(self.renderInlineAsText(tokens[idx].children || [], options, env));
  md.use(mathPlugin);
  _md = md;
  return md;
}

/** The HTML of Markdown `src`; `env.mathPending` is set when a formula is drawn as pending TeX (math.js). */
export function renderMarkdownHTML(src, env = {}) {
  return markdownIt().render(src, env);
}

const purifiers = new WeakMap();
function purifier(win) {
  let p = purifiers.get(win);
  if (p) return p;
  p = createDOMPurify(win);
  p.addHook("afterSanitizeAttributes", (node) => {
    if (node.namespaceURI === MATHML_NS) {
      // only the MathML attributes of MATH_ATTRS (no style, class, id or href)
      for (const attr of Array.from(node.attributes)) if (!MATH_ATTR_SET.has(attr.name)) node.removeAttribute(attr.name);
      return;
    }
    if (node.nodeName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });
  purifiers.set(win, p);
  return p;
}

const MATHML_NS = "http://www.w3.org/1998/Math/MathML";
// The MathML KaTeX writes for TeX (math.js leaves out <semantics> and its <annotation>), and nothing
// scriptable: no maction, no annotation-xml (an HTML integration point; dropped with its content),
// no href, no event handler, no style.
export const MATH_TAGS = [
  "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msup", "msub", "msubsup", "mfrac", "msqrt",
  "mroot", "mtable", "mtr", "mtd", "mover", "munder", "munderover", "mstyle", "mpadded", "mphantom", "menclose",
];
export const MATH_ATTRS = [
  "display", "displaystyle", "scriptlevel", "mathvariant", "stretchy", "fence", "separator", "symmetric",
  "largeop", "movablelimits", "form", "lspace", "rspace", "minsize", "maxsize", "accent", "accentunder",
  "columnalign", "rowalign", "columnspacing", "rowspacing", "columnlines", "rowlines", "frame",
  "framespacing", "equalrows", "equalcolumns", "width", "height", "depth", "voffset", "linethickness",
  "notation",
];
const MATH_TAG_SET = new Set(MATH_TAGS);
const MATH_ATTR_SET = new Set(MATH_ATTRS);

const PURIFY_CONFIG = {
  USE_PROFILES: { html: true }, // no svg; MathML as MATH_TAGS and MATH_ATTRS say
  ADD_TAGS: MATH_TAGS,
  ADD_ATTR: (attr, tag) => attr === "target" || (MATH_TAG_SET.has(tag) && MATH_ATTR_SET.has(attr)),
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed",
    "maction", "annotation-xml", "semantics", "annotation"],
  ADD_FORBID_CONTENTS: ["annotation-xml", "annotation"],
  RETURN_DOM_FRAGMENT: true,
};

/** Sanitize markdown-it HTML into a DocumentFragment of `doc`, with copy buttons on code blocks. */
export function htmlToFragment(doc, html) {
  const win = doc.defaultView;
  const frag = purifier(win).sanitize(html, PURIFY_CONFIG);
  const out = frag.ownerDocument === doc ? frag : doc.importNode(frag, true);
  decorateCode(doc, out);
  return out;
}

function decorateCode(doc, root) {
  for (const pre of Array.from(root.querySelectorAll("pre"))) {
    const code = pre.querySelector("code");
    let lang = "";
    if (code) {
      const m = /(?:^|\s)language-([^\s]+)/.exec(code.getAttribute("class") || "");
      if (m) lang = m[1];
    }
    const wrap = h(doc, "div", "mmsp-code");
    const bar = h(doc, "div", "mmsp-code-bar");
    bar.appendChild(h(doc, "span", "mmsp-code-lang", null, lang));
    bar.appendChild(
      h(doc, "button", "mmsp-btn mmsp-copy-code", { type: "button", "aria-label": "Copy code", title: "Copy code" }, "Copy"),
    );
    // shown in the chat only (widget.css): a new notebook cell below, with this code
    bar.appendChild(
      h(doc, "button", "mmsp-btn mmsp-insert-code", { type: "button", "aria-label": "Insert into a new cell", title: "Insert into a new cell below the chat" }, "Insert"),
    );
    pre.parentNode.insertBefore(wrap, pre);
    wrap.appendChild(bar);
    wrap.appendChild(pre);
  }
}

const FENCE_OPEN = /^(\s*)(`{3,}|~{3,})(.*)$/;
// A display formula opening a line (math.js: its block rule, tried where a block starts, the
// indentation before it skipped), maybe after the markers of a list item or a block quote
const MATH_AT = /^([ \t]*)((?:(?:>[ \t]?|(?:[-*+]|\d{1,9}[.)])[ \t]+)[ \t]*)*)(\$\$|\\\[)/;
const HEADING = /^ {0,3}#{1,6}(?:[ \t]|$)/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/; // a thematic break, or a setext underline of dashes
const SETEXT = /^ {0,3}=+[ \t]*$/;
const MARKER = /^ {0,3}(?:>[ \t]?|(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$))/; // a list item's or block quote's line
const REF_LINE = /^ {0,3}\[[^\]\n]*\]:/;
const MARKERS = /^(?:[ \t]*(?:>|(?:[-*+]|\d{1,9}[.)])(?=[ \t]|$)))+[ \t]*/; // all of a line's markers

const QUOTES = [null, /^ {0,3}>[ \t]?/, /^ {0,3}>[ \t]?\s*>[ \t]?/, /^ {0,3}>[ \t]?\s*>[ \t]?\s*>[ \t]?/];

/** How many block quote markers (">") a line starts with. */
function quoteDepth(line) {
  let n = 0;
  for (let i = 0, sp = 0; i < line.length; i++) {
    const c = line[i];
    if (c === ">") {
      n++;
      sp = 0;
    } else if (c === " " && sp < 3) sp++;
    else if (c !== "\t" || !n) break;
  }
  return n;
}

/** The columns of a line's indentation (a tab to the next multiple of 4). */
function indentOf(line) {
  let n = 0;
  for (const c of line) {
    if (c === " ") n++;
    else if (c === "\t") n += 4 - (n % 4);
    else break;
  }
  return n;
}

/**
 * Where the display formula whose opening delimiter `tag` is at `p` ends, as math.js's block rule
 * reads it (the rule's regular expression runs over the rest of the whole text): the index of the
 * "\n" ending its closing line; -1 when no formula opens there; null while the text so far cannot
 * tell (not closed yet, or closed at the very end of the text, where the line may go on).
 */
export function formulaEnd(text, p, tag) {
  let q;
  if (tag === "$$") {
    // no "$" inside: the first one closes, after a character that is no backslash
    q = text.indexOf("$", p + 2);
    if (q < 0) return null;
    if (q === p + 2 || text[q - 1] === "\\") return -1;
    if (q + 1 >= text.length) return null;
    if (text[q + 1] !== "$") return -1;
    q += 2;
  } else {
    // no "\[" or "\]" inside but the closing one (a backslash escapes any other character)
    let i = p + 2;
    for (;;) {
      i = text.indexOf("\\", i);
      if (i < 0 || i + 1 >= text.length) return null;
      const c = text[i + 1];
      if (c === "[") return -1;
      if (c === "]") break;
      i += 2;
    }
    if (i === p + 2) return -1;
    q = i + 2;
  }
  while (q < text.length && (text[q] === " " || text[q] === "\t")) q++;
  if (q >= text.length) return null;
  return text[q] === "\n" ? q : -1;
}

/**
 * Where the stable prefix of `text` may end, scanning from `from` (where a top-level block starts
 * and nothing is open): the index just after the last safe blank line, or `from` when there is none.
 */
export function stableBoundary(text, from = 0) {
  return scanStable(text, from).boundary;
}

/**
 * The stable prefix of `text` from `from` ({boundary}: stableBoundary), and `open`: the start of
 * the line of a display formula that is not closed yet, or of a line where it is not sure whether
 * a fence is open (-1 when there is none), after which no table may start (the formula or the
 * fence may take it in).
 *
 * Blocks are followed line by line as markdown-it reads them, as far as a split needs: a fenced
 * code block, a display formula (where math.js's block rule would start one: at the start of a
 * block, never inside a paragraph; and only if its delimiters match as the rule's regular
 * expression does), and whether the next line starts a block. Where that is not sure (a formula
 * after the marker of a list item or a block quote, or after a line that may be a table's
 * delimiter row), the lines up to where the formula would close are kept whole, and fences are
 * followed through them.
 */
export function scanStable(text, from = 0) {
  let boundary = from;
  // {ch, len, indent, held: opened in lines that may be a formula, nested: maybe in a list, depth:
  // in block quotes as deep}
  let fence = null;
  let pos = from;
  let prevBlank = false;
  let blankEnd = -1; // index after the last blank line outside a fence, candidate boundary
  // where the line stands: at the "start" of a block, after a "blank" line, in indented "code", in
  // a "para"graph (or a table) it may continue, or "unknown"
  let at = "start";
  let container = false; // a list or a block quote may hold the line
  let held = -1; // the lines up to this index may be a formula: nothing splits there
  let prevPipe = false;
  let prevDepth = 0; // the block quotes the last line is in (its ">" markers)
  while (pos < text.length) {
    const nl = text.indexOf("\n", pos);
    if (nl < 0) {
      // incomplete last line: it can still confirm a candidate if it already shows its start
      if (prevBlank && blankEnd >= 0 && startsTopLevelBlock(text, pos, text.length, false)) boundary = blankEnd;
      break;
    }
    const line = text.slice(pos, nl);
    const free = pos > held;
    // a fence opened in lines that may be a formula, open after them: whether it is open is not
    // sure, and nothing after splits
    if (fence && fence.held && free) return { boundary, open: pos };
    // (and one opened in a list item, when a line less indented than it may end the item and it)
    if (fence && !fence.depth && fence.nested && fence.indent > 0 && indentOf(line) < fence.indent && !/^\s*$/.test(line)) return { boundary, open: pos };
    // (one in a block quote ends with it at a blank line, and is not sure at another line out of it)
    if (fence && fence.depth && /^\s*$/.test(line)) fence = null;
    if (fence && fence.depth && quoteDepth(line) < fence.depth) return { boundary, open: pos };
    if (fence) {
      const m = FENCE_OPEN.exec(fence.depth ? line.replace(QUOTES[fence.depth] || /^/, "") : line);
      if (m && m[2][0] === fence.ch && m[2].length >= fence.len && /^\s*$/.test(m[3]) && m[1].length <= fence.indent + 3) {
        fence = null;
        at = nl === held ? "unknown" : "start";
      }
      prevBlank = false;
      pos = nl + 1;
      continue;
    }
    if (/^\s*$/.test(line)) {
      if (free) blankEnd = nl + 1;
      prevBlank = free;
      at = "blank";
      prevPipe = false;
      pos = nl + 1;
      continue;
    }
    if (prevBlank && blankEnd >= 0 && startsTopLevelBlock(text, pos, nl, true)) boundary = blankEnd;
    prevBlank = false;
    const ind = indentOf(line);
    const marker = MARKER.test(line);
    const depth = quoteDepth(line);
    // whether a block starts with the line: "yes", "no", "maybe", or "code" (an indented one)
    let start;
    if (at === "para") start = "no";
    else if (at === "unknown") start = "maybe";
    else if (ind < 4) start = "yes";
    else start = at === "code" || !container ? "code" : "maybe";
    if (start === "yes" && ind === 0 && !marker) container = false;
    if (marker) container = true;
    const math = start !== "code" ? MATH_AT.exec(line) : null;
    if (math) {
      // after markers: a block starts, unless the line goes on with the paragraph of a block quote
      // as deep; in lines that may be a formula, one may open (unless they are one: a formula in a
      // block quote may also be read again after the quote)
      let kind = start;
      if (math[2]) kind = at === "para" && depth > 0 && depth === prevDepth && !/[^\s>]/.test(math[2]) ? "no" : "maybe";
      else if (!free && kind !== "code") kind = "maybe";
      if (kind === "yes" || kind === "maybe") {
        const e = formulaEnd(text, pos + math[0].length - math[3].length, math[3]);
        if (e === null) return { boundary, open: pos };
        if (e >= 0 && kind === "yes") {
          // a formula: no fence in its lines, and a block starts after it
          at = "start";
          prevPipe = false;
          pos = e + 1;
          continue;
        }
        if (e >= 0) held = Math.max(held, e);
      }
    }
    // (a fence may open after the markers of a list item or a block quote: it is in them)
    const mk = marker ? MARKERS.exec(line)[0] : "";
    const f = ind >= 4 && !container ? null : FENCE_OPEN.exec(marker ? line.slice(mk.length) : line);
    if (f && !(f[2][0] === "`" && f[3].includes("`"))) {
      const indent = marker ? indentOf(mk.replace(/[^ \t]/g, " ")) : f[1].length;
      fence = { ch: f[2][0], len: f[2].length, indent, held: !free, nested: container, depth: depth };
      pos = nl + 1;
      continue;
    }
    let next = "para";
    if (start === "code") next = "code";
    else if (HEADING.test(line)) next = "start";
    else if (RULE.test(line)) next = at === "para" && prevPipe ? "unknown" : "start"; // (or a table's delimiter row)
    else if (SETEXT.test(line)) next = at !== "para" ? "para" : container ? "unknown" : "start";
    else if (REF_LINE.test(line) && start !== "no") next = "unknown";
    else if (marker && !/^[\p{L}\p{N}]/u.test(line.replace(MARKERS, ""))) next = "unknown";
    at = nl === held ? "unknown" : next;
    prevPipe = line.includes("|");
    prevDepth = depth;
    pos = nl + 1;
  }
  return { boundary, open: -1 };
}

// A line that cannot continue the block before the blank line: not indented, not a list item.
// An incomplete last line needs a few characters to tell ("1" may become "1. item").
function startsTopLevelBlock(text, start, end, complete) {
  if (end <= start) return false;
  const c = text[start];
  if (c === " " || c === "\t") return false;
  const line = text.slice(start, Math.min(end, start + 12));
  if (/^[-*+](\s|$)/.test(line)) return false;
  if (/^\d{1,9}[.)](\s|$)/.test(line)) return false;
  if (!complete && (/^[-*+]$/.test(line) || /^\d{1,10}$/.test(line))) return false;
  return true;
}

const REF_DEF = /^ {0,3}\[[^\]\n]+\]:/m;

const FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";

/** The focusable elements of `n` (itself first, unless `self` is false), in document order. */
export function focusables(n, self = true) {
  const list = Array.from(n.querySelectorAll(FOCUSABLE));
  if (self && n.matches(FOCUSABLE)) list.unshift(n);
  return list;
}

/** Incrementally rendered Markdown inside `el` (which it owns). */
export class StreamingMarkdown {
  constructor(el) {
    this.el = el;
    this.doc = el.ownerDocument;
    this.text = "";
    this.stableLen = 0;
    this.stableHTML = []; // html of each stable piece
    this.tailNodes = [];
    this.tailHTML = "";
    this.renderedLen = -1; // text length the DOM reflects
    this.final = false;
    this.disposed = false;
    this.table = null; // the tail's table drawn a row at a time (table.js)
    this.tableFrom = 0; // where the next table looked for in the tail may start
    this.openAt = -1; // where a display formula not closed yet starts in the tail (scanStable)
    this.lostFocus = null; // what had the focus when the text was drawn anew (reset)
  }

  reset(text) {
    const f = this.focusIn(0);
    if (f) this.lostFocus = f; // (handed on by the next flush)
    this.el.textContent = "";
    this.text = text || "";
    this.stableLen = 0;
    this.stableHTML = [];
    this.tailNodes = [];
    this.tailHTML = "";
    this.renderedLen = -1;
    this.final = false;
    this.table = null;
    this.tableFrom = 0;
    this.openAt = -1;
  }

  append(s) {
    this.text += s;
    this.final = false;
  }

  get dirty() {
    return this.renderedLen !== this.text.length;
  }

  /**
   * Bring the DOM up to date. `finished`: the text is complete (check against a full render).
   * A focused element in the nodes drawn again (a code block's Copy button, a link) hands the
   * focus on to its counterpart (focusIn, refocus).
   */
  flush(finished = false) {
    const f = this.focusIn(this.el.childNodes.length - this.tailNodes.length);
    const changed = this.draw(finished);
    this.refocus(f);
    if (this.lostFocus) {
      this.refocus(this.lostFocus);
      this.lostFocus = null;
    }
    return changed;
  }

  draw(finished) {
    if (this.renderedLen === this.text.length && !(finished && this.table)) {
      if (!finished || this.final) return false;
      this.finalize();
      return true;
    }
    const env = {};
    if (this.table && !this.flushTable(finished, env)) {
      this.renderedLen = this.text.length;
      if (env.mathPending) requestMath(this);
      return true;
    }
    const scan = scanStable(this.text, this.stableLen);
    const b = scan.boundary;
    this.openAt = scan.open;
    if (b > this.stableLen) {
      const html = renderMarkdownHTML(this.text.slice(this.stableLen, b), env);
      this.removeTail();
      this.el.appendChild(htmlToFragment(this.doc, html));
      this.stableHTML.push(html);
      this.stableLen = b;
    }
    this.removeTail();
    if (!finished && this.enterTable(env)) {
      this.renderedLen = this.text.length;
      if (env.mathPending) requestMath(this);
      return true;
    }
    const tail = this.text.slice(this.stableLen);
    this.tailHTML = tail ? renderMarkdownHTML(tail, env) : "";
    if (this.tailHTML) {
      const frag = htmlToFragment(this.doc, this.tailHTML);
      this.tailNodes = Array.from(frag.childNodes);
      this.el.appendChild(frag);
    }
    this.renderedLen = this.text.length;
    if (env.mathPending) requestMath(this);
    if (finished) this.finalize();
    return true;
  }

  /**
   * Draw the new rows of the tail's table; returns true when the table has ended (it and what came
   * before it in the tail are then a stable piece, and the text after it is drawn the plain way),
   * or when it is to be drawn the plain way again.
   */
  flushTable(finished, env) {
    const t = this.table;
    const end = t.advance(this.text, finished, env);
    if (end === -1) return false;
    this.table = null;
    if (end === null) {
      this.tableFrom = Math.max(this.tableFrom, t.at + 1);
      return true;
    }
    this.stableHTML.push(t.html());
    this.stableLen = end;
    this.tableFrom = end;
    this.tailNodes = [];
    this.tailHTML = "";
    return true;
  }

  /** Start drawing a table of the tail a row at a time (table.js), when the tail holds one. */
  enterTable(env) {
    // (not after a display formula not closed yet: it may take the table in)
    const end = this.openAt >= 0 ? this.openAt : this.text.lastIndexOf("\n") + 1;
    const at = findTable(this.text, this.stableLen, end, Math.max(this.tableFrom, this.stableLen));
    if (at < 0) return false;
    const made = TableStream.enter(this.text, this.stableLen, at, renderMarkdownHTML, (html) => htmlToFragment(this.doc, html), env);
    if (!made) {
      this.tableFrom = at + 1; // (not this one again)
      return false;
    }
    this.table = made.stream;
    this.tailNodes = made.stream.nodes;
    this.el.appendChild(made.frag);
    return true;
  }

  /** Draw the text again (math.js calls it once the math engine is loaded). */
  redraw() {
    if (this.renderedLen < 0 || this.disposed) return;
    const finished = this.final;
    this.reset(this.text);
    this.flush(finished);
  }

  finalize() {
    this.final = true;
    // The pieces equal a full render except where a reference-style link definition in one piece
    // serves a link in another: only then is the whole text rendered again (a long task on a
    // 100 KB answer, which the common case never pays).
    if (!REF_DEF.test(this.text)) return;
    const pieces = this.stableHTML.join("") + this.tailHTML;
    const env = {};
    const full = renderMarkdownHTML(this.text, env);
    if (env.mathPending) requestMath(this);
    if (full === pieces) return;
    const f = this.focusIn(0);
    this.el.textContent = "";
    this.el.appendChild(htmlToFragment(this.doc, full));
    this.refocus(f);
    this.stableHTML = [];
    this.stableLen = 0;
    this.tailNodes = Array.from(this.el.childNodes);
    this.tailHTML = full;
  }

  /** The element is gone: nothing is drawn into it any more, and math.js forgets it. */
  dispose() {
    this.disposed = true;
    releaseMath(this);
  }

  /**
   * Where the focus is, when it is on an element inside the children of the element from `start`
   * on (those to be drawn again): {node, start, index: its place among the focusable elements
   * there}; else null. Only those children are looked at.
   */
  focusIn(start) {
    const active = this.doc.activeElement;
    if (!active || active === this.el || !this.el.contains(active)) return null;
    const kids = this.el.childNodes;
    let index = 0;
    for (let k = Math.max(0, start); k < kids.length; k++) {
      const n = kids[k];
      if (n.nodeType !== 1) continue;
      const list = focusables(n);
      if (n === active || n.contains(active)) {
        const at = list.indexOf(active);
        return { node: active, start, index: at < 0 ? -1 : index + at };
      }
      index += list.length;
    }
    return null;
  }

  /**
   * The focused element `f` (focusIn) was drawn again: the focus goes to its counterpart (the
   * element at its place), or to the message itself, never to the page (where the next keys would
   * be the notebook's shortcuts).
   */
  refocus(f) {
    if (!f || (f.node.isConnected && this.el.contains(f.node))) return;
    const now = this.doc.activeElement;
    if (now && now !== this.doc.body && now.isConnected) return; // (the focus is somewhere else now)
    let target = null;
    if (f.index >= 0) {
      const kids = this.el.childNodes;
      let index = f.index;
      for (let k = Math.max(0, f.start); k < kids.length && !target; k++) {
        if (kids[k].nodeType !== 1) continue;
        const list = focusables(kids[k]);
        if (index < list.length) target = list[index];
        else index -= list.length;
      }
    }
    if (!target) {
      if (!this.el.hasAttribute("tabindex")) this.el.setAttribute("tabindex", "-1");
      target = this.el;
    }
    target.focus({ preventScroll: true });
  }

  removeTail() {
    for (const n of this.tailNodes) n.remove();
    this.tailNodes = [];
    this.tailHTML = "";
  }
}
