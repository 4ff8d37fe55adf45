// A view that drew a formula while the math renderer is not loaded is kept until it is, to be drawn
// again; a view destroyed before then (or drawn again for another turn) is let go: nothing keeps it
// while no kernel answers, and nothing is drawn into it when the renderer comes after all.
import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { connectMath, mathLoaded, mathWaiting, useMathEngine } from "../src/math.js";
import * as katexEngine from "../src/katex.js";
import { createTurnView } from "../src/render.js";
import { fakeModel } from "./fake_model.js";

const manual = { request: () => 1, cancel: () => {} };
const turn = (id, text) => ({ id, status: "complete", items: [{ i: 0, kind: "text", status: "done", text }] });

test("math: destroyed views are not kept while the renderer does not load, nor drawn into once it does", () => {
  const doc = new JSDOM("<!doctype html><html><body></body></html>").window.document;
  const model = fakeModel({});
  const unmath = connectMath(model, 60_000); // a kernel that does not answer (busy with a cell)
  const gone = createTurnView(doc.body, { schedule: manual });
  const kept = createTurnView(doc.body, { schedule: manual });
  const reused = createTurnView(doc.body, { schedule: manual });
  gone.render(turn("t1", "gone $x^2$"));
  kept.render(turn("t2", "kept $y_1$"));
  reused.render(turn("t3", "old $z$"));
  assert.equal(mathLoaded(), false);
  assert.equal(mathWaiting(), 3);
  const goneText = gone.el.querySelector(".mmsp-text");
  const oldText = reused.el.querySelector(".mmsp-text");
  assert.equal(goneText.querySelector("code.mmsp-math-pending").textContent, "$x^2$");

  gone.destroy();
  assert.equal(mathWaiting(), 2);
  // a view reused for another turn lets the drawing of the previous one go
  reused.render(turn("t4", "no formula"));
  assert.equal(mathWaiting(), 1);

  // the renderer comes: the live view is drawn again, the views that are gone are not
  useMathEngine(katexEngine);
  assert.equal(mathWaiting(), 0);
  assert.ok(kept.el.querySelector(".mmsp-text math msub"));
  assert.equal(goneText.querySelector("math"), null);
  assert.equal(goneText.querySelector("code.mmsp-math-pending").textContent, "$x^2$");
  assert.equal(oldText.querySelector("math"), null);
  assert.equal(reused.el.querySelector(".mmsp-text").textContent.trim(), "no formula");
  unmath();
  kept.destroy();
  reused.destroy();
});
