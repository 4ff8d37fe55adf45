// The math renderer is loaded on first use: formulas show their TeX, escaped, until the kernel has
// sent katex.js (a math_code message with the file in a binary buffer), then the Markdown is drawn
// again as MathML. The engine is shared by every widget on the page and fetched once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { JSDOM } from "jsdom";
import turnWidget from "../src/turn.js";
import { mathLoaded } from "../src/math.js";
import { fakeModel } from "./fake_model.js";

const KATEX = fileURLToPath(new URL("../../mmsp_notebook/static/katex.js", import.meta.url));
const CODE = readFileSync(KATEX);

// Node cannot import blob: URLs: the Blob math.js makes is checked, and the built file stands in
const blobs = [];
URL.createObjectURL = (blob) => {
  blobs.push(blob);
  return pathToFileURL(KATEX).href;
};
URL.revokeObjectURL = () => {};

function widget(kernel) {
  const jsdom = new JSDOM("<!doctype html><html><body></body></html>");
  const el = jsdom.window.document.createElement("div");
  jsdom.window.document.body.appendChild(el);
  const model = fakeModel({ turn: null });
  const send = model.send;
  // the kernel: answers math_code with katex.js in a buffer (a DataView, as ipywidgets gives it)
  model.send = (msg) => {
    send(msg);
    if (msg.type === "math_code" && kernel.answers) {
      kernel.asked++;
      setTimeout(() => model.custom({ type: "math_code" }, [new DataView(CODE.buffer, CODE.byteOffset, CODE.byteLength)]), 5);
    }
  };
  const cleanup = turnWidget.render({ model, el });
  return { el, model, cleanup };
}

const turn = (text) => ({ status: "complete", items: [{ i: 0, kind: "text", status: "done", text }] });

async function until(cond, ms = 5000) {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > ms) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}

test("math: pending TeX, escaped, until the kernel sends the renderer; then MathML, fetched once", async () => {
  const kernel = { answers: true, asked: 0 };
  const a = widget(kernel);
  const b = widget(kernel);
  assert.equal(mathLoaded(), false);
  assert.equal(a.model.sent.filter((m) => m.type === "math_code").length, 0, "no request before any math");

  const hostile = "so $x^2$ and $<img src=x onerror=alert(1)>$ and \\(<script>alert(1)</script>\\)";
  a.model.custom({ type: "snapshot", turn: turn(hostile) });
  b.model.custom({ type: "snapshot", turn: turn("$$\\frac{1}{2}$$") });
  const text = a.el.querySelector(".mmsp-text");
  const pending = [...text.querySelectorAll("code.mmsp-math-pending")];
  assert.deepEqual(pending.map((c) => c.textContent), ["$x^2$", "$<img src=x onerror=alert(1)>$", "\\(<script>alert(1)</script>\\)"]);
  assert.equal(text.querySelectorAll("math, img, script").length, 0);
  assert.equal(b.el.querySelector("code.mmsp-math-pending").textContent, "$$\\frac{1}{2}$$");

  await until(() => a.el.querySelector(".mmsp-text math") && b.el.querySelector(".mmsp-text math"));
  assert.equal(mathLoaded(), true);
  // both widgets drawn again, from one request
  assert.equal(kernel.asked, 1);
  assert.equal(blobs.length, 1);
  assert.equal(blobs[0].type, "text/javascript");
  assert.equal(blobs[0].size, CODE.length);
  assert.ok(a.el.querySelector(".mmsp-text math msup"));
  assert.ok(b.el.querySelector(".mmsp-text math mfrac"));
  // nothing of the TeX became markup
  assert.equal(a.el.querySelectorAll("code.mmsp-math-pending").length, 0);
  assert.equal(a.el.querySelectorAll("img, script").length, 0);

  // a third widget draws math at once, asking nothing
  const c = widget(kernel);
  c.model.custom({ type: "snapshot", turn: turn("then $y_1$") });
  assert.ok(c.el.querySelector(".mmsp-text math msub"));
  assert.equal(c.model.sent.filter((m) => m.type === "math_code").length, 0);
  for (const w of [a, b, c]) w.cleanup();
  for (const w of [a, b, c]) assert.equal(w.model.listeners(), 0);
});
