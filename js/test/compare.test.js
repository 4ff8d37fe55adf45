// CompareView's front end: one column per model, drawn in the widget's own page, and gone with the view.
import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import compareWidget from "../src/compare.js";
import { fakeModel } from "./fake_model.js";

function setup(labels) {
  // (no global document here, as in a page whose widget lives in another document than the bundle's)
  const doc = new JSDOM("<!doctype html><html><body></body></html>").window.document;
  const el = doc.createElement("div");
  doc.body.appendChild(el);
  const model = fakeModel({ labels });
  const dispose = compareWidget.render({ model, el });
  return { doc, el, model, dispose };
}

const turn = (text) => ({ id: "t", status: "complete", items: [{ i: 0, kind: "text", status: "done", text }] });

test("compare: the columns are drawn in the widget's own document, from the labels trait", () => {
  const { doc, el, model, dispose } = setup(["alpha", "beta"]);
  assert.equal(typeof globalThis.document, "undefined");
  const heads = [...el.querySelectorAll(".mmsp-columns > .mmsp-column > .mmsp-column-head")];
  assert.deepEqual(heads.map((x) => x.textContent), ["alpha", "beta"]);
  assert.ok([...el.querySelectorAll("*")].every((n) => n.ownerDocument === doc));
  assert.deepEqual(model.sent, [{ type: "hello" }]);
  model.custom({ type: "ops", cols: [[1, [["turn", { status: "streaming" }]]]] });
  assert.equal(el.querySelectorAll(".mmsp-column-body > .mmsp-turn")[1].getAttribute("data-status"), "streaming");
  model.custom({ type: "snapshot", labels: ["alpha", "beta"], turns: [turn("one"), turn("two")] });
  assert.deepEqual([...el.querySelectorAll(".mmsp-text")].map((x) => x.textContent.trim()), ["one", "two"]);
  dispose();
});

test("compare: disposing the view removes its grid and its listeners", () => {
  const { el, model, dispose } = setup(["alpha", "beta"]);
  model.custom({ type: "snapshot", labels: ["alpha", "beta"], turns: [turn("one"), turn("two")] });
  assert.ok(model.listeners() > 0);
  dispose();
  assert.equal(el.childNodes.length, 0);
  assert.equal(el.className, "");
  assert.equal(model.listeners(), 0);
  // the element can hold a view again (anywidget renders a new view into it)
  const again = compareWidget.render({ model, el });
  assert.equal(el.querySelectorAll(".mmsp-columns").length, 1);
  assert.equal(el.querySelectorAll(".mmsp-column").length, 2);
  again();
  assert.equal(el.childNodes.length, 0);
});
