// No kernel answers the math_code request: formulas stay as their TeX source, escaped, and the widget
// keeps working.
import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { connectMath, mathLoaded } from "../src/math.js";
import { createTurnView } from "../src/render.js";
import { fakeModel } from "./fake_model.js";

const manual = { request: () => 1, cancel: () => {} };

test("math: with no answer from the kernel, formulas stay as escaped TeX", async () => {
  const doc = new JSDOM("<!doctype html><html><body></body></html>").window.document;
  const model = fakeModel({});
  const unmath = connectMath(model, 30);
  const view = createTurnView(doc.body, { schedule: manual });
  view.render({ status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "a $x<b$ c **d**" }] });
  view.flush();
  assert.deepEqual(model.sent, [{ type: "math_code" }]);
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(mathLoaded(), false);
  assert.equal(doc.querySelector("code.mmsp-math-pending").textContent, "$x<b$");
  assert.ok(doc.querySelector(".mmsp-text strong"));
  // a refused source is not asked again on the next draw
  view.render({ status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "$y$" }] });
  view.flush();
  assert.equal(model.sent.length, 1);
  // an answer without code is a failure too, for a widget that comes next
  const other = fakeModel({});
  const undo = connectMath(other, 1000);
  assert.deepEqual(other.sent, [{ type: "math_code" }]);
  other.custom({ type: "math_code", error: "katex.js is missing" });
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(mathLoaded(), false);
  undo();
  unmath();
  view.destroy();
});
