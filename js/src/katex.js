// The KaTeX half of math.js, built into its own file (mmsp_notebook/static/katex.js) and loaded only
// when a formula is to be drawn: the widget bundles do not carry it. The kernel sends the file over
// the widget's custom messages (`math_code`), math.js imports it from a Blob URL.
//
// TeX is rendered with output "mathml" and trust off (\href, \url, \htmlClass… are refused). What
// this returns is sanitized with the rest of the Markdown (markdown.js: MATH_TAGS, MATH_ATTRS).

import katex from "katex";

/** The MathML of `tex` (a <math> element), or null when it is not valid TeX. */
export function mathml(tex, display) {
  try {
    const html = katex.renderToString(String(tex), {
      output: "mathml",
      displayMode: !!display,
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
    // a ParseError, or anything else KaTeX throws: the caller shows the source instead
  }
  return null;
}

export default { mathml };
