import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const here = (p) => fileURLToPath(new URL(p, import.meta.url));

// Every selector of a rule list: comments stripped, at-rules walked.
function selectors(css) {
  const out = [];
  const keyframes = [];
  const src = css.replace(/\/\*[\s\S]*?\*\//g, "");
  let i = 0;
  const walk = (end) => {
    while (i < end) {
      const open = src.indexOf("{", i);
      if (open < 0 || open >= end) return;
      const head = src.slice(i, open).trim();
      // find the matching brace
      let depth = 1;
      let j = open + 1;
      while (depth && j < src.length) {
        if (src[j] === "{") depth++;
        else if (src[j] === "}") depth--;
        j++;
      }
      if (head.startsWith("@keyframes")) keyframes.push(head.split(/\s+/)[1]);
      else if (head.startsWith("@media") || head.startsWith("@supports")) {
        i = open + 1;
        walk(j - 1);
      } else if (head) out.push(...head.split(",").map((s) => s.trim()));
      i = j;
    }
  };
  walk(src.length);
  return { out, keyframes };
}

for (const file of ["../src/widget.css", "../../mmsp_notebook/static/widget.css"]) {
  test(`${file}: every rule is scoped under .mmsp-root`, { skip: !existsSync(here(file)) }, () => {
    const { out, keyframes } = selectors(readFileSync(here(file), "utf8"));
    assert.ok(out.length > 50);
    // scoped under .mmsp-root; the one prefix allowed is the theme kind JupyterLab names on <body>
    for (const s of out) assert.match(s, /^(\[data-jp-theme-light="?(true|false)"?\] )?\.mmsp-root(?=[\s.:[>]|$)/, `unscoped selector: ${s}`);
    for (const k of keyframes) assert.match(k, /^mmsp-/, `unprefixed keyframes: ${k}`);
    for (const s of out) {
      for (const cls of s.match(/\.[\w-]+/g) || []) assert.match(cls, /^\.mmsp-/, `class without the mmsp- prefix: ${cls} in ${s}`);
    }
  });
}

// Each rule's declarations by selector (comments stripped; a rule inside @media counts as well).
function declarations(css) {
  const out = new Map();
  const src = css.replace(/\/\*[\s\S]*?\*\//g, "");
  for (const m of src.matchAll(/([^{}]+)\{([^{}]*)\}/g)) {
    const decls = m[2].split(";").map((d) => d.split(":").map((x) => x.trim())).filter((d) => d.length === 2);
    for (const sel of m[1].split(",").map((s) => s.trim())) out.set(sel, [...(out.get(sel) || []), ...decls]);
  }
  return out;
}

for (const file of ["../src/widget.css", "../../mmsp_notebook/static/widget.css"]) {
  test(`${file}: a long word in an error or a tool's name wraps, never widening the chat`, { skip: !existsSync(here(file)) }, () => {
    // (a URL or minified JSON in an error made the log scroll sideways and pushed the error's
    // dismiss button out of the chat; a long tool name hid the tool's state)
    const rules = declarations(readFileSync(here(file), "utf8"));
    const has = (sel, prop, value) =>
      assert.ok((rules.get(`.mmsp-root ${sel}`) || []).some(([p, v]) => p === prop && v === value), `.mmsp-root ${sel} { ${prop}: ${value} }`);
    for (const sel of [".mmsp-banner", ".mmsp-banner-detail", ".mmsp-chat-error", ".mmsp-composer-note", ".mmsp-tool-name"]) has(sel, "overflow-wrap", "anywhere");
    has(".mmsp-chat-error-text", "min-width", "0");
    has(".mmsp-chat-error .mmsp-dismiss", "flex", "none");
    has(".mmsp-tool-name", "min-width", "0");
    has(".mmsp-tool-state", "flex", "none");
  });
}

for (const name of ["turn.js", "chat.js"]) {
  const file = `../../mmsp_notebook/static/${name}`;
  test(`${name}: the bundle imports nothing and exports a render`, { skip: !existsSync(here(file)) }, async () => {
    const code = readFileSync(here(file), "utf8");
    assert.doesNotMatch(code, /(^|[;}\s])import\s*(?:[\w*{}\s,$]+from\s*)?["']/m, "no static import");
    assert.doesNotMatch(code, /import\(\s*["']/, "no dynamic import");
    assert.doesNotMatch(code, /https?:\/\/(cdn|unpkg|esm\.sh|jsdelivr)/i, "no CDN");
    const mod = await import(here(file));
    assert.equal(typeof mod.default.render, "function");
  });
}
