// Every widget bundle (turn.js, chat.js, …) carries its own copy of math.js. Formulas one bundle drew
// while nothing was loading the renderer (its kernel did not send it) are drawn again when another
// bundle loads it later (here from a math_code message its kernel sends unasked); a destroyed view
// is neither kept nor drawn into, and a bundle with nothing waiting leaves the page-wide set.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as esbuild from "esbuild";
import { JSDOM } from "jsdom";
import { fakeModel } from "./fake_model.js";

const HERE = fileURLToPath(new URL("..", import.meta.url));
const KATEX = fileURLToPath(new URL("../../mmsp_notebook/static/katex.js", import.meta.url));
const CODE = readFileSync(KATEX);
const READY = Symbol.for("mmsp_notebook.math.ready.v1");

// Node cannot import blob: URLs: the built file stands in for the Blob math.js makes
URL.createObjectURL = () => pathToFileURL(KATEX).href;
URL.revokeObjectURL = () => {};

/** Two copies of a widget bundle built from the sources, each with its own math.js, as on a page. */
async function twoBundles() {
  const out = await esbuild.build({
    stdin: {
      contents: 'export { default } from "./src/turn.js"; export { mathWaiting, mathLoaded } from "./src/math.js";',
      resolveDir: HERE,
      loader: "js",
    },
    bundle: true,
    format: "esm",
    platform: "browser",
    write: false,
    logLevel: "warning",
    absWorkingDir: HERE,
    alias: { katex: "./src/katex-stub.js", "linkify-it": "./src/linkify-stub.js" },
  });
  const dir = mkdtempSync(join(tmpdir(), "mmsp-math-bundles-"));
  const file = join(dir, "turn.mjs");
  writeFileSync(file, out.outputFiles[0].text);
  const url = pathToFileURL(file).href;
  const bundles = [await import(`${url}?copy=a`), await import(`${url}?copy=b`)];
  rmSync(dir, { recursive: true, force: true });
  return bundles;
}

function widget(bundle) {
  const doc = new JSDOM("<!doctype html><html><body></body></html>").window.document;
  const el = doc.createElement("div");
  doc.body.appendChild(el);
  const model = fakeModel({ turn: null });
  const cleanup = bundle.default.render({ model, el });
  return { el, model, cleanup };
}

const turn = (text) => ({ status: "complete", items: [{ i: 0, kind: "text", status: "done", text }] });

/** How many bundles wait for the renderer (the page-wide set of math.js). */
const bundlesWaiting = () => globalThis[READY]?.size ?? 0;

/** The kernel of `w` was asked for the renderer and answers without it. */
async function refused(w) {
  await until(() => w.model.sent.some((m) => m.type === "math_code"));
  w.model.custom({ type: "math_code", error: "katex.js is missing" });
  await new Promise((r) => setTimeout(r, 10));
}

async function until(cond, ms = 5000) {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > ms) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}

test("math: formulas a bundle drew while nothing was loading are drawn when another bundle loads the renderer", async () => {
  const [a, b] = await twoBundles();
  assert.notEqual(a.mathWaiting, b.mathWaiting, "two copies of math.js");

  // bundle a: its kernel cannot send the renderer, so its formulas stay as TeX and nothing is loading
  const kept = widget(a);
  kept.model.custom({ type: "snapshot", turn: turn("kept $x^2$") });
  await refused(kept);
  const gone = widget(a);
  gone.model.custom({ type: "snapshot", turn: turn("gone $y_1$") });
  await refused(gone);
  assert.equal(a.mathLoaded(), false);
  assert.equal(a.mathWaiting(), 2);
  assert.equal(kept.el.querySelector("code.mmsp-math-pending").textContent, "$x^2$");
  const goneText = gone.el.querySelector(".mmsp-text");
  gone.cleanup();
  assert.equal(a.mathWaiting(), 1);
  const sizes = [bundlesWaiting()]; // bundle a waits for the renderer

  // bundle b: a view drawn and destroyed before the renderer comes; b has nothing waiting then
  const brief = widget(b);
  brief.model.custom({ type: "snapshot", turn: turn("brief $w$") });
  assert.equal(b.mathWaiting(), 1);
  sizes.push(bundlesWaiting());
  const briefText = brief.el.querySelector(".mmsp-text");
  brief.cleanup();
  assert.equal(b.mathWaiting(), 0);
  sizes.push(bundlesWaiting()); // a bundle with nothing waiting leaves the page-wide set
  await new Promise((r) => setTimeout(r, 20));

  // bundle b: its kernel sends the renderer (unasked, as for a turn it streams, or answering)
  const other = widget(b);
  // (a new widget asks its kernel at once: another bundle has formulas waiting)
  const asked = other.model.sent.filter((m) => m.type === "math_code").length;
  other.model.custom({ type: "math_code" }, [new DataView(CODE.buffer, CODE.byteOffset, CODE.byteLength)]);
  await until(() => b.mathLoaded());
  other.model.custom({ type: "snapshot", turn: turn("then $z$") });
  assert.ok(other.el.querySelector(".mmsp-text math"));

  // bundle a heard it: its live view is MathML now; the destroyed views were not drawn into
  await until(() => kept.el.querySelector(".mmsp-text math"), 1000);
  assert.ok(kept.el.querySelector(".mmsp-text math msup"));
  assert.equal(kept.el.querySelectorAll("code.mmsp-math-pending").length, 0);
  assert.equal(a.mathWaiting(), 0);
  for (const [text, tex] of [[goneText, "$y_1$"], [briefText, "$w$"]]) {
    assert.equal(text.querySelector("math"), null);
    assert.equal(text.querySelector("code.mmsp-math-pending").textContent, tex);
  }
  sizes.push(bundlesWaiting()); // no bundle is kept once nothing waits
  assert.deepEqual(sizes, [1, 2, 1, 0], "the bundles in the page-wide set");
  assert.equal(asked, 1);

  for (const w of [kept, other]) w.cleanup();
  for (const w of [kept, gone, brief, other]) assert.equal(w.model.listeners(), 0);
});
