// For tests/test_html.py: draw turns with the widget's renderer (js/src/render.js, in jsdom) and
// parse their static HTML (mmsp_notebook/_html.py), and print both DOMs as comparable skeletons.
//
//   stdin:  {"cases": [{"vm": viewModel} | {"ops": [op, …]}, "html": staticHtml}, …]}
//   stdout: [{"widget": skeleton, "static": skeleton}, …]
//
// A skeleton lists every element (tag, classes, the attributes that change what is shown) and every
// non-blank text, with its depth. Left out: what only one side has by design: the widget's copy
// buttons and hidden (empty) status/footer, the static view's <style> and copy <script>, its "mmsp-static" marker and
// its footer separators (not drawn where the stylesheet applies).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(new URL("../js/package.json", import.meta.url));
const { JSDOM } = require("jsdom");
const { createTurnView } = await import(new URL("../js/src/render.js", import.meta.url));
// formulas as MathML at once (in the page, the math renderer is loaded on first use)
const { useMathEngine } = await import(new URL("../js/src/math.js", import.meta.url));
useMathEngine(await import(new URL("../js/src/katex.js", import.meta.url)));

const ATTRS = ["open", "title", "data-state", "href", "src", "alt", "aria-label", "aria-hidden", "role", "controls",
  "data-status", "preload", "loading", "start", "tabindex", "scope"];

function skeleton(el, out = [], depth = 0) {
  for (const c of el.childNodes) {
    if (c.nodeType === 3) {
      const t = c.data.replace(/\s+/g, " ").trim();
      if (t) out.push([depth, "#text", t]);
      continue;
    }
    if (c.nodeType !== 1) continue;
    if (c.tagName === "STYLE" || c.tagName === "SCRIPT" || c.tagName === "BUTTON" || c.hidden || c.classList.contains("mmsp-sep")) continue;
    const attrs = {};
    for (const a of ATTRS) if (c.hasAttribute(a)) attrs[a] = c.getAttribute(a);
    const cls = [...c.classList].filter((x) => x !== "mmsp-static").sort().join(" ");
    out.push([depth, c.tagName.toLowerCase(), cls, attrs]);
    skeleton(c, out, depth + 1);
  }
  return out;
}

const manual = { request: () => 1, cancel: () => {} };
const input = JSON.parse(readFileSync(0, "utf8"));
const results = [];
for (const c of input.cases) {
  const { document } = new JSDOM("<!doctype html><html><body></body></html>").window;
  const live = document.createElement("div");
  const stat = document.createElement("div");
  document.body.append(live, stat);
  const view = createTurnView(live, { schedule: manual, onCopy: () => true });
  if (c.vm) view.render(c.vm);
  if (c.ops) view.apply(c.ops);
  view.flush();
  stat.innerHTML = c.html;
  results.push({ widget: skeleton(live), static: skeleton(stat) });
}
process.stdout.write(JSON.stringify(results));
