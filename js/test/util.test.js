import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { copyText, rovingTabStop } from "../src/util.js";

function list(n, options = {}) {
  const win = new JSDOM("<!doctype html><html><body></body></html>").window;
  const doc = win.document;
  const root = doc.createElement("ul");
  for (let k = 0; k < n; k++) {
    const li = doc.createElement("li");
    li.setAttribute("tabindex", "-1");
    li.dataset.k = String(k);
    const b = doc.createElement("button");
    b.textContent = `button ${k}`;
    li.appendChild(b);
    root.appendChild(li);
  }
  doc.body.appendChild(root);
  const undo = [];
  const listen = (target, type, fn) => {
    target.addEventListener(type, fn);
    undo.push(() => target.removeEventListener(type, fn));
  };
  const rove = rovingTabStop(root, listen, {
    items: () => [...root.children],
    itemOf: (t) => (t.closest ? t.closest("li") : null),
    ...options,
  });
  const stops = () => [...root.children].filter((li) => li.getAttribute("tabindex") === "0").map((li) => li.dataset.k);
  const key = (k) => {
    const e = new win.KeyboardEvent("keydown", { key: k, bubbles: true, cancelable: true });
    doc.activeElement.dispatchEvent(e);
    return e.defaultPrevented;
  };
  const focused = () => doc.activeElement.dataset.k;
  return { win, doc, root, rove, stops, key, focused, undo };
}

test("rovingTabStop: one item holds the stop, the fallback first, then the item focused", () => {
  const { root, rove, stops } = list(3);
  rove();
  assert.deepEqual(stops(), ["0"]);
  root.children[2].querySelector("button").focus(); // focus in an item gives it the stop
  assert.deepEqual(stops(), ["2"]);
  rove(); // kept where it is
  assert.deepEqual(stops(), ["2"]);
  root.children[2].remove(); // gone: the fallback takes it
  rove();
  assert.deepEqual(stops(), ["0"]);
  rove(root.children[1]);
  assert.deepEqual(stops(), ["1"]);
});

test("rovingTabStop: arrows, Home and End move the focus and the stop; past the ends the key is left alone", () => {
  const { root, rove, stops, key, focused } = list(4);
  rove();
  root.children[1].focus();
  assert.equal(key("ArrowDown"), true);
  assert.equal(focused(), "2");
  assert.deepEqual(stops(), ["2"]);
  key("End");
  assert.equal(focused(), "3");
  assert.equal(key("ArrowDown"), false, "nothing below the last: the key scrolls as it would");
  assert.equal(focused(), "3");
  key("Home");
  assert.equal(focused(), "0");
  assert.equal(key("ArrowUp"), false);
  key("ArrowDown");
  assert.deepEqual([focused(), ...stops()], ["1", "1"]);
  assert.equal(key("x"), false, "other keys pass");
  assert.deepEqual(stops(), ["1"]);
});

test("rovingTabStop: holdEnds swallows an arrow past the ends; keyItem limits which targets move; onRove and onRefocus are told", () => {
  const roved = [];
  const refocused = [];
  const { root, rove, key, focused, stops } = list(3, {
    holdEnds: true,
    keyItem: (t) => (t.tagName === "LI" ? t : null),
    fallback: (all) => all[all.length - 1],
    onRove: (all) => roved.push(all.length),
    onRefocus: (it) => refocused.push(it.dataset.k),
  });
  rove();
  assert.deepEqual(stops(), ["2"], "the fallback chosen");
  root.children[2].focus();
  assert.deepEqual(refocused, ["2"], "focus back in the item holding the stop");
  assert.equal(key("ArrowDown"), true, "held at the end");
  assert.equal(focused(), "2");
  root.children[0].querySelector("button").focus();
  assert.deepEqual(stops(), ["0"]);
  assert.equal(key("ArrowDown"), false, "a key on a control inside an item does not move");
  assert.equal(focused(), undefined);
  assert.ok(roved.length >= 2 && roved.every((n) => n === 3));
});

test("rovingTabStop: its listeners are the ones registered through listen", () => {
  const { root, undo, stops } = list(2);
  for (const u of undo) u();
  root.children[1].focus();
  assert.deepEqual(stops(), [], "nothing listens any more");
});

test("copyText: with no Clipboard API (a page served over plain http) the copy leaves the focus where it was", async () => {
  const win = new JSDOM("<!doctype html><html><body><button id=b>Copy</button></body></html>").window;
  const doc = win.document;
  // as in Chromium, selecting the textarea focuses it (jsdom's select does not)
  const select = win.HTMLTextAreaElement.prototype.select;
  win.HTMLTextAreaElement.prototype.select = function () {
    this.focus();
    select.call(this);
  };
  let copied = null;
  doc.execCommand = (cmd) => {
    copied = cmd === "copy" ? doc.activeElement.value : null;
    return true;
  };
  assert.equal(win.navigator.clipboard, undefined);
  const b = doc.getElementById("b");
  b.focus();
  assert.equal(await copyText("some code", doc), true);
  assert.equal(copied, "some code");
  assert.equal(doc.activeElement, b, "not the page, where the next keys would be the notebook's shortcuts");
  assert.equal(doc.querySelectorAll("textarea").length, 0);
});
