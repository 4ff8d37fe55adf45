// The widget bundles decode markdown-it's named character references with the page's own HTML
// parser (src/entities-stub.js) instead of carrying the entity table.
import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { decodeHTMLStrict } from "../src/entities-stub.js";

test("named references decode as the page decodes them; anything else is left as it is", () => {
  assert.equal(decodeHTMLStrict("&hearts;"), "&hearts;"); // no document: unchanged
});

test("with a document: every HTML entity, unknown names and odd input unchanged, never markup", () => {
  const { window } = new JSDOM("<!doctype html><body></body>");
  globalThis.document = window.document;
  try {
    assert.equal(decodeHTMLStrict("&frac12;"), "\u00bd");
    assert.equal(decodeHTMLStrict("&lt;"), "<");
    assert.equal(decodeHTMLStrict("&notanentity;"), "&notanentity;"); // the parser would decode its "&not"
    assert.equal(decodeHTMLStrict("&notin;"), "\u2209");
    assert.equal(decodeHTMLStrict("&semi;"), ";");
    assert.equal(decodeHTMLStrict("&amp<img src=x onerror=alert(1)>;"), "&amp<img src=x onerror=alert(1)>;");
    assert.equal(window.document.querySelectorAll("img").length, 0);
  } finally {
    delete globalThis.document;
  }
});
