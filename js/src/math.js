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
// The TeX is rendered by KaTeX (output "mathml", trust off: katex.js), which is not in the widget
// bundles: the first time a formula is to be drawn, a widget asks its kernel for katex.js
// (`{type: "math_code"}`, answered with the file in a binary buffer) and imports it from a Blob URL.
// The module is kept for the whole page (under a global symbol, since every widget bundle, and every
// widget, is a module of its own), so it is fetched once. Until it is there (or when no kernel
// answers), a formula shows its TeX source escaped in <code class="mmsp-math-pending">; the Markdown
// that held one is drawn again once it is (markdown.js: StreamingMarkdown), whichever bundle loads
// it: a bundle with drawings waiting is in a page-wide set of callbacks (READY), which the bundle
// that loads the module calls, so formulas one bundle drew while nothing was loading (its kernel
// did not answer) are drawn again when another bundle loads the renderer later.
// What drew a formula as pending is kept until then, unless it is released first (releaseMath: its
// view was destroyed), so a page where no kernel ever answers holds no view that is gone.
// A TeX error shows the source, delimiters included, escaped in <span class="mmsp-math-error">.
// What KaTeX returns is sanitized with the rest (markdown.js: MATH_TAGS, MATH_ATTRS).

import texmath from "markdown-it-texmath";

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

// ---------------------------------------------------------------- the lazily loaded engine

const SHARED = Symbol.for("mmsp_notebook.math.v1");
// The bundles waiting for the module: a Set of functions, each called with the module ({mathml})
// once it is loaded, by whichever copy of this file loaded it. A bundle is in it only while drawings
// of its own wait (it leaves once they are drawn or released), so it keeps no view that is gone.
// Kept apart from SHARED, whose shape copies of this file from before it do not change.
const READY = Symbol.for("mmsp_notebook.math.ready.v1");
const ANSWER_TIMEOUT_MS = 60_000; // a kernel busy with a cell answers when the cell is done

/** What every widget on the page shares: the loaded module, the load in flight, the kernels to ask. */
function shared() {
  const g = globalThis;
  if (!g[SHARED]) g[SHARED] = { module: null, loading: null, sources: [] };
  return g[SHARED];
}

/** The page-wide set of the bundles waiting for the module (READY). */
function readySet() {
  const g = globalThis;
  if (!(g[READY] instanceof Set)) g[READY] = new Set();
  return g[READY];
}

/** The module is loaded (`s.module`): every bundle waiting for it, this one or another, draws again. */
function announce(mod) {
  for (const fn of Array.from(readySet())) {
    try {
      fn(mod);
    } catch (e) {
      console.error("mmsp: redrawing math failed", e);
    }
  }
}

let engine = null; // this bundle's view of shared().module
let watched = null; // the load in flight this bundle waits on
const waiting = new Set(); // what drew a formula as pending: redraw() once the engine is here
const onReady = (mod) => {
  if (mod && typeof mod.mathml === "function") ready(mod);
};

/** Leave the page-wide set once nothing of this bundle waits. */
function unlisten() {
  if (!waiting.size) readySet().delete(onReady);
}

function ready(mod) {
  engine = mod;
  const redraw = Array.from(waiting);
  waiting.clear();
  unlisten();
  for (const r of redraw) {
    try {
      r.redraw();
    } catch (e) {
      console.error("mmsp: redrawing math failed", e);
    }
  }
}

function currentEngine() {
  if (!engine && shared().module) engine = shared().module;
  return engine;
}

async function importCode(code) {
  const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
  try {
    const mod = await import(url);
    if (!mod || typeof mod.mathml !== "function") throw new Error("not the math module");
    return mod;
  } finally {
    URL.revokeObjectURL(url);
  }
}

async function load(s, sources) {
  // the newest widget first (its kernel is the likeliest to be running); a source that fails is not
  // asked again
  for (const src of sources.slice().reverse()) {
    if (src.failed) continue;
    try {
      const mod = await importCode(await src.fetch());
      s.module = mod;
      announce(mod);
      return mod;
    } catch (e) {
      src.failed = true;
      console.warn("mmsp: the math renderer could not be loaded; formulas stay as TeX", e);
    }
  }
  s.loading = null;
  return null;
}

function watch(s) {
  if (!s.loading || watched === s.loading) return;
  const p = (watched = s.loading);
  p.then((mod) => {
    if (watched === p) watched = null;
    if (mod) ready(mod);
  });
}

/** Load the math engine unless it is loaded or loading; `who.redraw()` is called once it is there. */
export function requestMath(who) {
  if (currentEngine()) return;
  if (who) {
    waiting.add(who);
    readySet().add(onReady);
  }
  const s = shared();
  if (!s.loading && s.sources.some((src) => !src.failed)) s.loading = load(s, s.sources);
  watch(s);
}

/** `who` is gone (its view destroyed, or drawn again without it): it is not redrawn, nor kept, any more. */
export function releaseMath(who) {
  waiting.delete(who);
  unlisten();
}

/** How many drawings of this bundle wait for the engine, to be drawn again once it is loaded. */
export function mathWaiting() {
  return waiting.size;
}

/** Whether formulas are drawn as MathML now (else as their pending TeX). */
export function mathLoaded() {
  return !!currentEngine();
}

/** Use `mod` ({mathml(tex, display)}: katex.js) as the engine, e.g. in tests or where it is bundled. */
export function useMathEngine(mod) {
  const s = shared();
  s.module = mod;
  ready(mod);
  announce(mod);
}

/**
 * Let `model` (an anywidget model whose kernel answers `{type: "math_code"}`) serve katex.js to every
 * widget on the page. Returns the cleanup (call it when the widget's view goes away).
 */
export function connectMath(model, timeout = ANSWER_TIMEOUT_MS) {
  const asks = [];
  const onMsg = (msg, buffers) => {
    if (!msg || typeof msg !== "object" || msg.type !== "math_code") return;
    const code = Array.isArray(buffers) && buffers.length ? buffers[0] : null;
    const pending = asks.splice(0);
    for (const a of pending) a.done(code);
    // sent unasked (the kernel saw math in a turn it streams): loaded when nothing else is loading it
    const s = shared();
    if (!pending.length && code && !s.module && !s.loading) {
      s.loading = load(s, [{ failed: false, fetch: async () => code }]);
      watch(s);
    }
  };
  const source = {
    failed: false,
    fetch: () =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => a.done(null, "no answer from the kernel"), timeout);
        const a = {
          done(code, why) {
            clearTimeout(timer);
            const i = asks.indexOf(a);
            if (i >= 0) asks.splice(i, 1);
            if (code) resolve(code);
            else reject(new Error(why || "the kernel sent no math code"));
          },
        };
        asks.push(a);
        model.send({ type: "math_code" });
      }),
  };
  model.on("msg:custom", onMsg);
  const s = shared();
  s.sources.push(source);
  // what this bundle, or another one, drew before any kernel could be asked (or while none answered)
  if (waiting.size || readySet().size) requestMath(null);
  return () => {
    if (typeof model.off === "function") model.off("msg:custom", onMsg);
    const list = shared().sources;
    const i = list.indexOf(source);
    if (i >= 0) list.splice(i, 1);
    for (const a of asks.slice()) a.done(null, "the widget went away");
  };
}

// ---------------------------------------------------------------- rendering

/**
 * The MathML of `tex`; its source (with `open` and its closer) escaped when it is not valid TeX, or in
 * a pending <code> while the engine is not loaded (`env.mathPending` is then set).
 */
export function renderMath(tex, display, open, escapeHtml, env) {
  const source = escapeHtml(open + tex + CLOSE[open]);
  const eng = currentEngine();
  if (!eng) {
    if (env) env.mathPending = true;
    return `<code class="mmsp-math-pending">${source}</code>`;
  }
  const out = eng.mathml(tex, display);
  if (typeof out === "string" && out.startsWith("<math")) return out;
  return `<span class="mmsp-math-error">${source}</span>`;
}

/** markdown-it plugin: math tokens rendered as MathML. */
export function mathPlugin(md) {
  // texmath registers the rules of the delimiter sets it is given: ours, under a name of its own
  texmath.rules.mmsp = RULES;
  // (an engine of its own is given so that texmath never looks for KaTeX: every rule is drawn below)
  md.use(texmath, { engine: { renderToString: () => "" }, delimiters: "mmsp" });
  const esc = md.utils.escapeHtml;
  for (const rule of RULES.inline) {
    md.renderer.rules[rule.name] = (tokens, idx, _options, env) => renderMath(tokens[idx].content, !!rule.display, rule.tag, esc, env);
  }
  for (const rule of RULES.block) {
    md.renderer.rules[rule.name] = (tokens, idx, _options, env) => {
      const out = renderMath(tokens[idx].content, true, rule.tag, esc, env);
      return (out.startsWith("<math") ? out : `<p>${out}</p>`) + "\n";
    };
  }
}
