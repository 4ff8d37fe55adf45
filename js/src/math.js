// TeX math in Markdown, rendered as MathML (MathML Core: the browser lays it out, no fonts, no CSS).
//
// The delimiters are those of markdown-it-texmath's `dollars` and `brackets` sets, with rules of
// our own (the same regular expressions as mmsp_notebook/views/markdown.py, so the live view and
// the static HTML find the same formulas):
//   inline   $…$   no space after the opening $, none before the closing one, no $ inside, not
//                  right after a backslash or a digit, no digit right after ("$5 and $10" is text)
//            $$…$$ inside a paragraph (display)
//            \(…\)
//   block    $$…$$ and \[…\] starting a block and ending their line
// Code spans and code blocks are parsed before the inline rules see them, so they keep their
// dollars. A formula not closed yet (mid-stream) matches nothing and stays text. The content of \(…\)
// and \[…\] may not hold another opener, so a text full of unclosed openers costs linear time.
//
// KaTeX renders the TeX with output "mathml" and trust off (\href, \url, \htmlClass… are refused);
// a TeX error shows the source, delimiters included, escaped in <span class="mmsp-math-error">.
// What KaTeX returns is sanitized with the rest (markdown.js: MATH_TAGS, MATH_ATTRS).

import texmath from "markdown-it-texmath";
import katex from "katex";

const CLOSE = { $: "$", $$: "$$", "\\(": "\\)", "\\[": "\\]" };

const pre = texmath.$_pre;
const post = texmath.$_post;
const RULES = {
  inline: [
    { name: "math_inline_double", rex: /\$\$([^$]*?[^$\\])\$\$/y, tag: "$$", display: true, pre, post },
    { name: "math_inline", rex: /\$([^$\s\\]|[^$\s][^$]*?[^$\s\\])\$/y, tag: "$", pre, post },
    { name: "math_inline_paren", rex: /\\\(((?:[^\\]|\\[^()])+?)\\\)/y, tag: "\\(" },
  ],
  block: [
    { name: "math_block", rex: /\$\$([^$]*?[^$\\])\$\$[ \t]*(?=\n|$)/y, tag: "$$", display: true },
    { name: "math_block_bracket", rex: /\\\[((?:[^\\]|\\[^[\]])+?)\\\][ \t]*(?=\n|$)/y, tag: "\\[", display: true },
  ],
};

/** The MathML of `tex`, or its source (with `open` and its closer) escaped when it is not valid TeX. */
export function renderMath(tex, display, open, escapeHtml) {
  try {
    const html = katex.renderToString(tex, {
      output: "mathml",
      displayMode: display,
      throwOnError: true,
      trust: false,
      strict: "ignore",
      maxExpand: 1000,
      maxSize: 50,
    });
    // only the <math> element (KaTeX wraps it in <span class="katex">) and what it shows: the
    // <semantics> around it and the <annotation> holding the TeX again are left out
    const start = html.indexOf("<math");
    const end = html.lastIndexOf("</math>");
    if (start >= 0 && end > start) {
      return html.slice(start, end + 7).replace("<semantics>", "").replace(/<annotation [^>]*>[^<]*<\/annotation><\/semantics>/, "");
    }
  } catch {
    // a ParseError, or anything else KaTeX throws: the source is shown instead
  }
  return `<span class="mmsp-math-error">${escapeHtml(open + tex + CLOSE[open])}</span>`;
}

/** markdown-it plugin: math tokens rendered as MathML. */
export function mathPlugin(md) {
  // texmath registers the rules of the delimiter sets it is given: ours, under a name of its own
  texmath.rules.mmsp = RULES;
  md.use(texmath, { engine: katex, delimiters: "mmsp" });
  const esc = md.utils.escapeHtml;
  for (const rule of RULES.inline) {
    md.renderer.rules[rule.name] = (tokens, idx) => renderMath(tokens[idx].content, !!rule.display, rule.tag, esc);
  }
  for (const rule of RULES.block) {
    md.renderer.rules[rule.name] = (tokens, idx) => {
      const out = renderMath(tokens[idx].content, true, rule.tag, esc);
      return (out.startsWith("<math") ? out : `<p>${out}</p>`) + "\n";
    };
  }
}
