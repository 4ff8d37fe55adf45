import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { createTurnView } from "../src/render.js";
import { StreamingMarkdown, stableBoundary, renderMarkdownHTML, htmlToFragment } from "../src/markdown.js";
import { useMathEngine } from "../src/math.js";
import * as katexEngine from "../src/katex.js";

// the math renderer as if it were loaded already (test/math.test.js: how it is loaded)
useMathEngine(katexEngine);

function dom() {
  const jsdom = new JSDOM("<!doctype html><html><body></body></html>");
  const { document } = jsdom.window;
  const container = document.createElement("div");
  document.body.appendChild(container);
  return { win: jsdom.window, doc: document, container };
}

// a scheduler that never fires by itself: tests call view.flush()
const manual = { request: () => 1, cancel: () => {} };

function makeView(opts = {}) {
  const d = dom();
  const view = createTurnView(d.container, { schedule: manual, ...opts });
  return { ...d, view };
}

const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const WAV = "data:audio/wav;base64,UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";

// A view model as mmsp_notebook/views/model.py presents it: every label, state and footer string
// decided there. The renderer only places them (tests/test_html.py checks the Python side).
function fullVM() {
  return {
    id: "t1",
    model: "demo",
    status: "complete",
    items: [
      {
        i: 0, kind: "thinking", status: "done", text: "Let me think.\nStep 2.", duration: 3.2,
        tag: "thinking", label: "Thought for 3.2 s", badge: { text: "signed", title: "fidelity: signature" },
      },
      { i: 1, kind: "text", status: "done", text: "# Title\n\nSome **bold** text and a [link](https://example.com).\n\n- a\n- b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n```python\nprint('hi')\n```\n" },
      {
        i: 2,
        kind: "tool_call",
        status: "done",
        name: "get_weather",
        tool_call_id: "c1",
        text: '{"city": "Paris"}',
        tag: "tool call",
        title: "id c1",
        state: "done",
        state_text: "returned",
        args: '{\n  "city": "Paris"\n}',
        result: { state: "ok", label: "result", took: "4 ms", text: "18 °C" },
      },
      { i: 3, kind: "image", status: "done", mime_type: "image/png", src: PNG, tag: "image", meta: "image/png · 70 B", alt: "generated image (image/png)", rejected: "image · image/png — not shown" },
      { i: 4, kind: "audio", status: "done", mime_type: "audio/wav", src: WAV, seconds: 1.5, tag: "audio", meta: "audio/wav · 1.5 s", rejected: "audio · audio/wav · 1.5 s — not shown" },
      { i: 5, kind: "embedding", status: "done", dims: 64, norm: 1.0, tag: "embedding", meta: "64 dims · norm 1.000", preview: "[0.100, -0.200, 0.300, …]" },
      { i: 6, kind: "inline_thinking", status: "done", mime_type: "application/octet-stream", bytes: 120, tag: "thinking (opaque)", label: "Thinking (opaque) · 120 B", meta: "application/octet-stream · 120 bytes", badge: null },
      { i: 7, kind: "data", status: "done", mime_type: "application/pdf", bytes: 5120, tag: "data", meta: "application/pdf · 5.0 KB" },
    ],
    banner: null,
    footer: {
      usage: { cached_tokens: 0, prompt_tokens: 12, thoughts_tokens: 30, response_tokens: 80 },
      finish_reason: "stop",
      ttft: 0.41,
      total: 2.2,
      tokens_per_second: 54.2,
      cost: 0.0012,
      steps: 2,
      stats: [
        ["tokens", "tokens cached 0 · prompt 12 · thoughts 30 · response 80", "token usage per bucket"],
        ["finish", "finish: stop"],
        ["ttft", "TTFT 410 ms", "time to first token"],
        ["total", "total 2.20 s"],
        ["speed", "54.2 tok/s", "response tokens per second"],
        ["cost", "$0.0012"],
        ["steps", "2 steps", "model calls in this turn"],
      ],
    },
  };
}

test("renders every item kind from a view model, placing its strings", () => {
  const { view, container } = makeView();
  view.render(fullVM());
  const q = (s) => container.querySelector(s);
  // thinking
  const th = q(".mmsp-thinking:not(.mmsp-inline-thinking)");
  assert.equal(th.querySelector("summary .mmsp-summary-label").textContent, "Thought for 3.2 s");
  assert.equal(th.querySelector(".mmsp-badge").textContent, "signed");
  assert.equal(th.querySelector(".mmsp-badge").title, "fidelity: signature");
  assert.equal(th.querySelector("details").open, false, "collapsed: the answer follows");
  assert.equal(th.querySelector(".mmsp-thinking-body").textContent, "Let me think.\nStep 2.");
  // text → markdown
  const md = q(".mmsp-text");
  assert.equal(md.querySelector("h1").textContent, "Title");
  assert.equal(md.querySelector("strong").textContent, "bold");
  const a = md.querySelector("a");
  assert.equal(a.getAttribute("href"), "https://example.com");
  assert.equal(a.getAttribute("target"), "_blank");
  assert.equal(a.getAttribute("rel"), "noopener noreferrer");
  assert.equal(md.querySelectorAll("li").length, 2);
  assert.equal(md.querySelectorAll("table td").length, 2);
  const code = md.querySelector(".mmsp-code");
  assert.equal(code.querySelector("pre code").textContent, "print('hi')\n");
  assert.equal(code.querySelector(".mmsp-code-lang").textContent, "python");
  const copyBtn = code.querySelector("button.mmsp-copy-code");
  assert.equal(copyBtn.getAttribute("aria-label"), "Copy code");
  // tool call
  const tool = q(".mmsp-tool");
  assert.equal(tool.getAttribute("data-state"), "done");
  assert.equal(tool.querySelector(".mmsp-tool-label").textContent, "tool call");
  assert.equal(tool.querySelector(".mmsp-tool-name").textContent, "get_weather");
  assert.equal(tool.querySelector(".mmsp-tool-name").title, "id c1");
  assert.equal(tool.querySelector(".mmsp-tool-state").textContent, "returned");
  assert.equal(tool.querySelector(".mmsp-tool-args.mmsp-parsed").textContent, '{\n  "city": "Paris"\n}');
  assert.ok(tool.querySelector(".mmsp-tool-result.mmsp-ok"));
  assert.equal(tool.querySelector(".mmsp-tool-result-label").textContent, "result");
  assert.equal(tool.querySelector(".mmsp-tool-result-head .mmsp-meta").textContent, "4 ms");
  assert.equal(tool.querySelector(".mmsp-tool-output").textContent, "18 °C");
  // media
  assert.equal(q(".mmsp-image img").getAttribute("src"), PNG);
  assert.equal(q(".mmsp-image img").getAttribute("alt"), "generated image (image/png)");
  const audio = q(".mmsp-audio audio");
  assert.ok(audio.hasAttribute("controls"));
  assert.equal(audio.getAttribute("src"), WAV);
  assert.equal(audio.getAttribute("aria-label"), "audio · audio/wav · 1.5 s");
  assert.equal(q(".mmsp-audio .mmsp-meta").textContent, "audio · audio/wav · 1.5 s");
  assert.equal(q(".mmsp-embedding .mmsp-meta").textContent, "embedding · 64 dims · norm 1.000");
  assert.equal(q(".mmsp-embedding-preview").textContent, "[0.100, -0.200, 0.300, …]");
  assert.equal(q(".mmsp-inline-thinking .mmsp-summary-label").textContent, "Thinking (opaque) · 120 B");
  assert.equal(q(".mmsp-inline-thinking .mmsp-meta").textContent, "application/octet-stream · 120 bytes");
  assert.equal(q(".mmsp-inline-thinking .mmsp-badge"), null);
  assert.equal(q(".mmsp-data").textContent, "data · application/pdf · 5.0 KB");
  // footer: one stat per string, its key as a class, its title (when it has one) as a tooltip
  const stats = [...container.querySelectorAll(".mmsp-footer .mmsp-stat")];
  assert.deepEqual(stats.map((e) => e.textContent), fullVM().footer.stats.map((s) => s[1]));
  assert.deepEqual(stats.map((e) => e.className), fullVM().footer.stats.map((s) => `mmsp-stat mmsp-${s[0]}`));
  assert.equal(stats[2].title, "time to first token");
  assert.equal(stats[3].hasAttribute("title"), false);
  // no banner: nothing in the status line
  assert.equal(q(".mmsp-streaming"), null);
  assert.equal(q(".mmsp-status").hidden, true);
  // items in order
  const kinds = [...container.querySelectorAll(".mmsp-items > .mmsp-item")].map((e) => e.className.split(" ")[1]);
  assert.deepEqual(kinds, ["mmsp-thinking", "mmsp-text", "mmsp-tool", "mmsp-image", "mmsp-audio", "mmsp-embedding", "mmsp-thinking", "mmsp-data"]);
});

test("banner: streaming indicator, warning with detail and hint, error, muted", () => {
  const { view, container } = makeView();
  const q = (s) => container.querySelector(s);
  const partial = [{ i: 0, kind: "text", status: "streaming", text: "partial" }];
  view.render({ status: "streaming", items: partial, banner: { kind: "streaming", text: "streaming…" }, footer: null });
  assert.equal(q(".mmsp-streaming .mmsp-streaming-label").textContent, "streaming…");
  assert.ok(q(".mmsp-streaming .mmsp-dot"));
  assert.equal(q(".mmsp-status").getAttribute("aria-live"), "polite");
  assert.equal(q(".mmsp-footer").hidden, true);

  view.render({ status: "incomplete", items: partial, banner: { kind: "warn", text: "ended without a stop event", detail: "RemoteProtocolError: peer closed", hint: "retry" } });
  assert.equal(q(".mmsp-status").className, "mmsp-status mmsp-banner mmsp-warn");
  assert.equal(q(".mmsp-banner-lead"), null);
  assert.equal(q(".mmsp-banner-text").textContent, "ended without a stop event");
  assert.equal(q(".mmsp-banner-detail").textContent, "RemoteProtocolError: peer closed");
  assert.equal(q(".mmsp-hint").textContent, "retry");
  assert.equal(q(".mmsp-text").textContent.trim(), "partial", "partial content stays visible");
  assert.equal(container.querySelector(".mmsp-turn").getAttribute("data-status"), "incomplete");

  view.render({ status: "error", items: partial, banner: { kind: "error", lead: "UpstreamError: ", text: "401 Unauthorized", hint: "Set OPENAI_API_KEY" } });
  assert.ok(q(".mmsp-status.mmsp-error"));
  assert.equal(q(".mmsp-banner-lead").textContent, "UpstreamError: ");
  assert.equal(q(".mmsp-banner-text").textContent, "401 Unauthorized");
  assert.equal(q(".mmsp-hint").textContent, "Set OPENAI_API_KEY");
  assert.equal(q(".mmsp-text").textContent.trim(), "partial");

  view.render({ status: "cancelled", items: partial, banner: { kind: "muted", text: "cancelled — partial output kept" } });
  assert.equal(q(".mmsp-status").textContent, "cancelled — partial output kept");
  assert.ok(q(".mmsp-status.mmsp-muted"));
  view.render({ status: "complete", items: [], banner: { kind: "<img src=x onerror=alert(1)> evil", text: "odd" } });
  assert.equal(q(".mmsp-status").className, "mmsp-status mmsp-banner mmsp-muted", "an unknown kind is not a class");
  view.render({ status: "complete", items: [], banner: null, footer: { stats: [["truncated", "⚠ truncated (length)", "t"], ["no such class!", "x"], { text: "not a stat" }] } });
  assert.equal(q(".mmsp-status").hidden, true);
  assert.deepEqual([...container.querySelectorAll(".mmsp-stat")].map((e) => e.className), ["mmsp-stat mmsp-truncated", "mmsp-stat"]);
});

// The ops that stream `vm` in, in batches: what the OpsTracker sends (the view fields of an
// item's first op, then of its .done, its result last).
const DONE_FIELDS = ["label", "args", "result", "src", "alt", "rejected", "duration", "dims", "norm", "preview", "bytes", "seconds", "meta", "badge", "state", "state_text"];
function opsFor(vm, chunk = 7) {
  const ops = [["turn", { status: "streaming", banner: { kind: "streaming", text: "streaming…" } }]];
  for (const it of vm.items) {
    const { text, ...rest } = it;
    const open = { ...rest, status: "streaming" };
    const doneFields = {};
    for (const k of DONE_FIELDS) {
      if (k in open) {
        doneFields[k] = open[k];
        delete open[k];
      }
    }
    ops.push(["item", it.i, open]);
    const t = text || "";
    for (let k = 0; k < t.length; k += chunk) ops.push(["append", it.i, t.slice(k, k + chunk)]);
    const { result, ...d } = doneFields;
    ops.push(["set", it.i, { status: it.status, ...d }]);
    if (result) ops.push(["set", it.i, { result }]);
  }
  ops.push(["turn", { status: vm.status, banner: vm.banner, footer: vm.footer }]);
  return ops;
}

test("ops produce the same DOM as a whole render of the final view model", () => {
  const vm = fullVM();
  const ops = opsFor(vm);
  for (const batch of [1, 5, 50, ops.length]) {
    const a = makeView();
    for (let k = 0; k < ops.length; k += batch) {
      a.view.apply(ops.slice(k, k + batch));
      if ((k / batch) % 3 === 0) a.view.flush();
    }
    a.view.flush();
    const b = makeView();
    b.view.render(vm);
    assert.equal(a.container.innerHTML, b.container.innerHTML, `batch ${batch}`);
    assert.deepEqual(JSON.parse(JSON.stringify(a.view.viewModel().items)).map((x) => x.text || ""), vm.items.map((x) => x.text || ""));
  }
});

test("ops: thinking collapses when the answer starts and shows its duration", () => {
  const { view, container } = makeView();
  view.apply([["turn", { status: "streaming" }], ["item", 0, { kind: "thinking", status: "streaming", label: "Thinking…", badge: null }], ["append", 0, "hmm"]]);
  const details = () => container.querySelector(".mmsp-thinking details");
  const label = () => container.querySelector(".mmsp-thinking .mmsp-summary-label").textContent;
  assert.equal(details().open, true);
  assert.equal(label(), "Thinking…");
  assert.equal(container.querySelector(".mmsp-thinking .mmsp-badge"), null);
  view.apply([["append", 0, " more"], ["set", 0, { status: "done", label: "Thought for 3.2 s", badge: { text: "signed", title: "fidelity: signature, id" } }]]);
  assert.equal(label(), "Thought for 3.2 s");
  assert.equal(details().open, true, "still open until the answer starts");
  assert.equal(container.querySelector(".mmsp-thinking .mmsp-badge").title, "fidelity: signature, id");
  view.apply([["item", 1, { kind: "text", status: "streaming" }], ["append", 1, "Answer"]]);
  assert.equal(details().open, false);
  assert.equal(container.querySelector(".mmsp-thinking-body").textContent, "hmm more");
  // a reader who opens it again keeps it open
  container.querySelector(".mmsp-thinking summary").click();
  assert.equal(details().open, true);
  view.apply([["item", 2, { kind: "text", status: "streaming" }]]);
  assert.equal(details().open, true);
});

test("ops: the tool card follows the states it is sent: streaming, running, raised, stopped", () => {
  const { view, container } = makeView();
  const q = (s) => container.querySelector(s);
  view.apply([["turn", { status: "streaming" }], ["item", 0, { kind: "tool_call", status: "streaming", name: "search", tool_call_id: "x", tag: "tool call", title: "id x", state: "streaming", state_text: "…", args: null, result: null }]]);
  assert.equal(q(".mmsp-tool-name").textContent, "search");
  assert.equal(q(".mmsp-tool-label").textContent, "tool call");
  assert.equal(q(".mmsp-tool-state").textContent, "…");
  view.apply([["append", 0, '{"q": '], ["append", 0, '"cats", "n": 3}']]);
  assert.equal(q(".mmsp-tool-args").textContent, '{"q": "cats", "n": 3}');
  assert.equal(q(".mmsp-tool-args.mmsp-parsed"), null);
  view.apply([["set", 0, { status: "done", state: "running", state_text: "running…", args: '{\n  "q": "cats",\n  "n": 3\n}' }]]);
  assert.equal(q(".mmsp-tool-args.mmsp-parsed").textContent, '{\n  "q": "cats",\n  "n": 3\n}');
  assert.equal(q(".mmsp-tool-state").textContent, "running…");
  assert.equal(q(".mmsp-tool").getAttribute("data-state"), "running");
  view.apply([["set", 0, { result: { state: "running", label: "running…" } }]]);
  assert.ok(q(".mmsp-tool-result.mmsp-running"));
  assert.equal(q(".mmsp-tool-result-label").textContent, "running…");
  assert.equal(q(".mmsp-tool-output"), null);
  view.apply([["set", 0, { state: "raised", state_text: "raised", result: { state: "err", label: "error", took: "1.50 s", text: "TimeoutError: took too long" } }]]);
  assert.ok(q(".mmsp-tool-result.mmsp-err"));
  assert.equal(q(".mmsp-tool-state").textContent, "raised");
  assert.equal(q(".mmsp-tool-output").textContent, "TimeoutError: took too long");
  assert.equal(q(".mmsp-tool-result-head .mmsp-meta").textContent, "1.50 s");
  // a card the turn stopped: what the model says, and no class from an unknown state
  view.apply([["item", 1, { kind: "tool_call", status: "done", name: "g", tag: "tool call", state: "stopped", state_text: "stopped", args: "{}", result: { state: "bogus state", label: "stopped" } }]]);
  const second = container.querySelectorAll(".mmsp-tool")[1];
  assert.equal(second.querySelector(".mmsp-tool-state").textContent, "stopped");
  assert.equal(second.querySelector(".mmsp-tool-result").className, "mmsp-tool-result mmsp-ok");
  assert.equal(second.querySelector(".mmsp-tool-name").hasAttribute("title"), false);
});

test("events table appears only with the first event op and shows the count it is sent", () => {
  const { view, container } = makeView();
  view.apply([["turn", { status: "streaming" }], ["item", 0, { kind: "text", status: "streaming" }]]);
  assert.equal(container.querySelector(".mmsp-events"), null);
  view.apply([["event", { n: "1", ms: "12.3", event_type: "content", type: "text.delta", preview: "<b>hi</b>" }]]);
  view.apply([["event", { n: "2", ms: "15.0", event_type: "stop", type: "stop", preview: "" }, "(1,002)"]]);
  const rows = container.querySelectorAll(".mmsp-events tbody tr");
  assert.equal(rows.length, 2);
  assert.deepEqual([...rows[0].children].map((td) => td.textContent), ["1", "12.3", "content", "text.delta", "<b>hi</b>"]);
  assert.equal(container.querySelector(".mmsp-events b"), null);
  assert.equal(container.querySelector(".mmsp-events summary .mmsp-meta").textContent, "(1,002)");
  assert.deepEqual([...container.querySelectorAll(".mmsp-events th")].map((th) => th.textContent), ["n", "ms", "event_type", "type", "preview"]);
  // a later whole render keeps the table
  view.render({ status: "complete", items: [] });
  assert.equal(container.querySelectorAll(".mmsp-events tbody tr").length, 2);
});

test("events table: a render of the same turn keeps it, a view reused for another turn starts it over", () => {
  const { view, container } = makeView();
  const row = (n) => ({ n: String(n), ms: "1.0", event_type: "content", type: "text.delta", preview: `row ${n}` });
  view.apply([["turn", { id: "t1", status: "streaming" }], ["event", row(1)], ["event", row(2), "(2)"]]);
  assert.equal(container.querySelectorAll(".mmsp-events tbody tr").length, 2);
  // the same turn again (a snapshot answering another view's hello): the rows stay
  view.render({ id: "t1", status: "streaming", items: [] });
  assert.equal(container.querySelectorAll(".mmsp-events tbody tr").length, 2);
  // the next turn (TurnView.reset sends its snapshot): no row of the previous turn is left
  view.render({ id: "t2", status: "streaming", items: [] });
  assert.equal(container.querySelector(".mmsp-events"), null);
  view.apply([["event", row(1), "(1)"]]);
  assert.equal(container.querySelectorAll(".mmsp-events").length, 1);
  const rows = container.querySelectorAll(".mmsp-events tbody tr");
  assert.deepEqual([...rows].map((tr) => tr.lastChild.textContent), ["row 1"]);
  assert.equal(container.querySelector(".mmsp-events summary .mmsp-meta").textContent, "(1)");
});

// ---------------------------------------------------------------- streaming markdown

function longDoc(targetBytes = 100_000) {
  const parts = [];
  let n = 0;
  let size = 0;
  while (size < targetBytes) {
    const k = n++;
    const block = [
      `## Section ${k}`,
      "",
      `Paragraph ${k} with *emphasis*, \`inline code\`, a [link](https://example.com/${k}) and some words to make it longer than a line of text would usually be.`,
      "Second line of the same paragraph.",
      "",
      "- item one",
      "- item two",
      "  continued",
      "",
      "1. first",
      "2. second",
      "",
      "| col a | col b | col c |",
      "|:------|:-----:|------:|",
      `| ${k} | b${k} | c |`,
      "| x | y | z |",
      "",
      "```js",
      `function f${k}() {`,
      "",
      "  // a blank line inside the fence above and below",
      "",
      "  return `<b>not html</b>`;",
      "}",
      "```",
      "",
      "> a quote",
      "> spanning lines",
      "",
      k % 3 === 0 ? "- loose item\n\n- another loose item\n\n  with a continuation paragraph\n" : "Closing words.",
      "",
      k % 5 === 0 ? "    indented code\n\n    more indented code\n" : "***",
      "",
    ].join("\n");
    parts.push(block);
    size += block.length;
  }
  return parts.join("\n");
}

test("stableBoundary stops at blank lines outside fences, before top-level blocks", () => {
  const t = "a\n\n```\nx\n\ny\n```\n\nb\n\n- l\n\n- m\n";
  const b = stableBoundary(t);
  assert.equal(t.slice(0, b), "a\n\n```\nx\n\ny\n```\n\n");
  assert.equal(stableBoundary("a\n\n    code\n"), 0);
  assert.equal(stableBoundary("a\n\nb"), 3);
  assert.equal(stableBoundary("a\n\n1"), 0, "an incomplete '1' may become a list item");
  assert.equal(stableBoundary("a\n\n-"), 0, "an incomplete '-' may become a list item");
  assert.equal(stableBoundary("a\n\n1. x\n"), 0, "a list after a paragraph is not split off");
  assert.equal(stableBoundary("```\na\n\nb\n"), 0, "open fence");
  assert.equal(stableBoundary("$$\na\n\nb\n"), 0, "open display formula");
  assert.equal(stableBoundary("\\[\na\n\nb\n"), 0, "open display formula");
  const f = "x\n\n$$\na\n\nb\n$$\n\nc\n";
  assert.equal(f.slice(0, stableBoundary(f)), "x\n\n$$\na\n\nb\n$$\n\n", "split before and after the formula, not in it");
  assert.equal(stableBoundary("$$x$$ y\n\nz\n"), 9, "a formula closed on its line opens nothing");
  const php = "PHP:\n$$name = 1;\n```php\n$a;\n\n$$a = 2;\n```\n\nz\n";
  assert.equal(php.slice(0, stableBoundary(php)), php.slice(0, -2), "a '$$' line inside a paragraph opens no formula");
  assert.equal(stableBoundary("# T\n$$\na\n\nb\n$$\n\nc\n"), 16, "a formula opens after a heading");
  assert.equal(stableBoundary("$$\na $ b\n\nc\n"), 10, "no formula: a '$' inside");
  assert.equal(stableBoundary("> $$\na\n\nb\n"), 0, "after a marker: kept whole until it closes");
});

// `text` streamed a character at a time (each drawn), then finished; and a full render of it
function streamedAndFull(text) {
  const { doc, container } = dom();
  const el = doc.createElement("div");
  container.appendChild(el);
  const md = new StreamingMarkdown(el);
  for (const ch of text) {
    md.append(ch);
    md.flush(false);
  }
  md.flush(true);
  const ref = doc.createElement("div");
  ref.appendChild(htmlToFragment(doc, renderMarkdownHTML(text)));
  return { el, ref };
}

test("math: a display formula with a blank line in it, streamed, ends as a full render draws it", () => {
  const { el, ref } = streamedAndFull("Before.\n\n$$\na = 1\n\nb = 2\n$$\n\nAfter.\n");
  assert.equal(el.innerHTML, ref.innerHTML);
  assert.ok(el.querySelector("math[display=block]"));
  assert.ok(!el.textContent.includes("$$"));
});

test("streaming a 100 KB Markdown document re-renders only the tail and ends equal to a full render", () => {
  const text = longDoc();
  assert.ok(text.length >= 100_000);
  const { doc, container } = dom();
  const el = doc.createElement("div");
  container.appendChild(el);
  const md = new StreamingMarkdown(el);
  // ~20,000 tokens of ~5 characters, flushed every 12 appends (one animation frame)
  let pos = 0;
  let appends = 0;
  let flushes = 0;
  let tailChars = 0;
  const t0 = performance.now();
  while (pos < text.length) {
    const n = 1 + ((pos * 7919) % 9);
    md.append(text.slice(pos, pos + n));
    pos += n;
    if (++appends % 12 === 0) {
      md.flush(false);
      flushes++;
      tailChars += md.text.length - md.stableLen;
      if (flushes % 200 === 0) {
        // mid-stream the DOM text equals a full render of the text so far, modulo the open tail
        assert.ok(md.stableLen > 0);
      }
    }
  }
  md.flush(false);
  const ms = performance.now() - t0;
  const ref = doc.createElement("div");
  ref.appendChild(htmlToFragment(doc, renderMarkdownHTML(text)));
  assert.equal(el.textContent, ref.textContent, "text equals a full render before the final check");
  assert.equal(md.stableHTML.join("") + md.tailHTML, renderMarkdownHTML(text), "pieces give the full render's HTML");
  assert.equal(el.innerHTML, ref.innerHTML);
  const avgTail = tailChars / flushes;
  assert.ok(avgTail < 2000, `average re-rendered tail ${avgTail.toFixed(0)} chars`);
  md.flush(true);
  assert.equal(el.innerHTML, ref.innerHTML);
  console.log(`# streamed ${text.length} chars in ${appends} appends, ${flushes} flushes: ${ms.toFixed(0)} ms, avg tail ${avgTail.toFixed(0)} chars`);
});

test("streaming markdown: the final DOM equals a full render even where the pieces differ", () => {
  const { el, ref } = streamedAndFull("See [the docs][d].\n\nMore text here.\n\n[d]: https://example.com/docs\n");
  assert.equal(el.innerHTML, ref.innerHTML);
  assert.equal(el.querySelector("a").getAttribute("href"), "https://example.com/docs");
});

test("text items batch appends and draw them on the next frame", async () => {
  const frames = [];
  const sched = { request: (fn) => (frames.push(fn), frames.length), cancel: () => {} };
  const { view, container } = makeView({ schedule: sched });
  view.apply([["turn", { status: "streaming" }], ["item", 0, { kind: "text", status: "streaming" }]]);
  view.apply([["append", 0, "Hello "]]);
  view.apply([["append", 0, "**world**"]]);
  assert.equal(frames.length, 1, "one frame requested for several batches");
  assert.equal(container.querySelector(".mmsp-text").textContent, "");
  frames.shift()();
  assert.equal(container.querySelector(".mmsp-text strong").textContent, "world");
});

// ---------------------------------------------------------------- XSS

const PAYLOADS = [
  "<script>alert(1)</script>",
  "<img src=x onerror=alert(1)>",
  "[x](javascript:alert(1))",
  "<svg onload=alert(1)>",
  "[y](JaVaScRiPt:alert(1))",
  "![z](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
  "<a href=\"javascript:alert(1)\">a</a>",
  "[w](vbscript:msgbox(1))",
  "<iframe src=\"javascript:alert(1)\"></iframe>",
  "![t](https://track.example/p.png?q=secret)",
];
const ALL = PAYLOADS.join("\n\n");

function assertClean(container) {
  assert.equal(container.querySelectorAll("script, svg, iframe, object, embed").length, 0, "no script/svg/iframe");
  for (const el of container.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      assert.ok(!/^on/i.test(attr.name), `no event handler attribute ${attr.name} on ${el.tagName}`);
      assert.ok(!/^\s*(javascript|vbscript):/i.test(attr.value), `no javascript: URL in ${el.tagName}[${attr.name}]`);
      assert.ok(!/^\s*data:image\/svg/i.test(attr.value), `no svg data URL in ${el.tagName}[${attr.name}]`);
    }
  }
  for (const img of container.querySelectorAll("img")) {
    assert.match(img.getAttribute("src"), /^data:image\/(png|jpeg|gif|webp);base64,/, "only raster data-URL images");
  }
}

test("XSS payloads in every string field stay inert", () => {
  const vm = {
    status: ALL,
    items: [
      { i: 0, kind: "thinking", status: "done", text: ALL, duration: 1, tag: ALL, label: ALL, badge: { text: ALL, title: ALL } },
      { i: 1, kind: "text", status: ALL, text: ALL },
      {
        i: 2,
        kind: "tool_call",
        status: "done",
        name: ALL,
        tool_call_id: ALL,
        text: ALL,
        tag: ALL,
        title: ALL,
        state: ALL,
        state_text: ALL,
        args: ALL,
        result: { state: ALL, label: ALL, took: ALL, text: ALL },
      },
      { i: 3, kind: "tool_call", status: "done", name: "t", text: "{}", args: "{}", result: { state: "ok", label: "result", text: ALL } },
      { i: 4, kind: "image", status: "done", mime_type: ALL, src: "javascript:alert(1)", tag: ALL, meta: ALL, alt: ALL, rejected: ALL },
      { i: 5, kind: "image", status: "done", mime_type: "image/svg+xml", src: "data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+", rejected: ALL },
      { i: 6, kind: "image", status: "done", mime_type: "image/png", src: 'data:image/png;base64,AAAA" onerror="alert(1)', alt: ALL },
      { i: 7, kind: "audio", status: "done", mime_type: "audio/wav", src: "javascript:alert(1)", tag: ALL, meta: ALL, rejected: ALL },
      { i: 8, kind: "data", status: "done", mime_type: ALL, bytes: 1, tag: ALL, meta: ALL },
      { i: 9, kind: ALL, status: "done", mime_type: ALL, tag: ALL, meta: ALL },
      { i: 10, kind: "embedding", status: "done", dims: 2, norm: 1, tag: ALL, meta: ALL, preview: ALL },
      { i: 11, kind: "text", status: "streaming", text: ALL.slice(0, 60) },
      { i: 12, kind: "inline_thinking", status: "done", label: ALL, meta: ALL, badge: { text: ALL, title: ALL } },
    ],
    footer: { usage: {}, finish_reason: ALL, stats: [[ALL, ALL, ALL]] },
    banner: { kind: ALL, lead: ALL, text: ALL, detail: ALL, hint: ALL },
  };
  const { view, container } = makeView();
  view.render(vm);
  assertClean(container);
  // the payloads are there, as text
  assert.ok(container.querySelector(".mmsp-tool-name").textContent.includes("<script>alert(1)</script>"));
  assert.ok(container.querySelector(".mmsp-thinking-body").textContent.includes("<img src=x onerror=alert(1)>"));
  assert.ok(container.querySelector(".mmsp-text").textContent.includes("<svg onload=alert(1)>"));
  assert.equal(container.querySelectorAll(".mmsp-image img").length, 0);
  assert.equal(container.querySelectorAll("audio").length, 0);

  // the same through ops, streamed character by character into the markdown
  const b = makeView();
  b.view.apply(opsFor(vm, 3));
  b.view.apply([["event", { n: ALL, ms: ALL, event_type: ALL, type: ALL, preview: ALL }, ALL]]);
  b.view.flush();
  assertClean(b.container);
});

test("markdown links: only safe schemes survive, and open in a new tab", () => {
  const { view, container } = makeView();
  view.render({
    status: "complete",
    items: [{ i: 0, kind: "text", status: "done", text: "[a](https://a.example) [b](javascript:alert(1)) [c](mailto:x@y.z) <https://auto.example> ![i](https://img.example/x.png)" }],
  });
  const hrefs = [...container.querySelectorAll("a")].map((a) => a.getAttribute("href"));
  assert.deepEqual(hrefs, ["https://a.example", "mailto:x@y.z", "https://auto.example"]);
  for (const a of container.querySelectorAll("a")) assert.equal(a.getAttribute("rel"), "noopener noreferrer");
});

test("markdown images are never loaded: their alt text stands in", () => {
  const { view, container } = makeView();
  view.render({
    status: "complete",
    items: [{ i: 0, kind: "text", status: "done", text: "see ![a *chart* <b>](https://track.example/p.png?q=secret) and ![dot](" + PNG + ")" }],
  });
  assert.equal(container.querySelectorAll("img").length, 0);
  assert.equal(container.querySelector(".mmsp-text p").textContent, "see a chart <b> and dot");
});

test("destroy removes the view", () => {
  const { view, container } = makeView();
  view.render(fullVM());
  view.destroy();
  assert.equal(container.children.length, 0);
  view.apply([["turn", { status: "error" }]]);
  assert.equal(container.children.length, 0);
});

test("a tool name a model gives is isolated: its bidi controls reorder nothing around it", () => {
  const { view, container } = makeView();
  const name = "get\u202eweather";
  view.render({ status: "complete", items: [{ i: 0, kind: "tool_call", status: "done", name, text: "{}", tag: "tool call", state: "done", state_text: "returned" }] });
  const el = container.querySelector(".mmsp-tool-name");
  assert.equal(el.textContent, name);
  assert.equal(el.getAttribute("dir"), "auto");
});

// ---------------------------------------------------------------- math

function mdDom(text) {
  const { doc } = dom();
  const el = doc.createElement("div");
  el.appendChild(htmlToFragment(doc, renderMarkdownHTML(text)));
  return el;
}

test("math: inline and display TeX become MathML", () => {
  const el = mdDom("inline $x^2$ and \\(a+b\\)\n\n$$\n\\frac{1}{2}\n$$\n\n\\[ \\sqrt{y} \\]\n");
  const maths = [...el.querySelectorAll("math")];
  assert.equal(maths.length, 4);
  for (const m of maths) assert.equal(m.namespaceURI, "http://www.w3.org/1998/Math/MathML");
  assert.deepEqual(maths.map((m) => m.getAttribute("display")), [null, null, "block", "block"]);
  assert.ok(maths[0].querySelector("msup"));
  assert.ok(maths[2].querySelector("mfrac"));
  assert.ok(maths[3].querySelector("msqrt"));
  assert.equal(el.querySelector("p").textContent.includes("$"), false);
});

test("math: prices and code keep their dollars, beside a formula", () => {
  for (const text of ["it costs $5 and $10", "from $5-$10", "between $ 5 and $ 6", "a $x$5", "\\$x\\$"]) {
    const el = mdDom(`$y^2$: ${text}`);
    assert.equal(el.querySelectorAll("math").length, 1, text);
    el.querySelector("math").remove();
    assert.equal(el.textContent.trim(), `: ${text.replaceAll("\\$", "$")}`, text);
  }
  const el = mdDom("`$x$` and $y$\n\n```\n$$y$$\n```\n");
  assert.equal(el.querySelectorAll("math").length, 1);
  assert.equal(el.querySelector("p code").textContent, "$x$");
  assert.equal(el.querySelector("pre code").textContent, "$$y$$\n");
});

test("math: a TeX error shows its source, escaped", () => {
  const el = mdDom("bad $\\frac{a<b$ end");
  assert.equal(el.querySelectorAll("math").length, 0);
  assert.equal(el.querySelector(".mmsp-math-error").textContent, "$\\frac{a<b$");
  assert.equal(el.querySelectorAll("b").length, 0);
});

test("math: hostile payloads leave nothing scriptable", () => {
  const el = mdDom("$\\href{javascript:alert(1)}{x}$ \\(\\url{javascript:alert(2)}\\) $\\htmlClass{x}{y}$\n\n<math><maction actiontype=\"statusline\"><mi>x</mi></maction></math>");
  assert.equal(el.querySelectorAll("[href], maction, annotation-xml, [style], a").length, 0);
  assert.ok(el.textContent.includes('<math><maction actiontype="statusline">'));
  // what the sanitizer does with MathML that Markdown never produces
  const { doc } = dom();
  const frag = htmlToFragment(doc, '<p><math display="block" style="color:red" href="javascript:alert(1)" onclick="alert(1)">'
    + '<annotation-xml encoding="text/html"><img src="x" onerror="alert(1)"></annotation-xml>'
    + '<maction actiontype="statusline"><mi xlink:href="javascript:alert(1)" class="c" id="i">y</mi></maction>'
    + '<semantics><mi>z</mi><annotation encoding="text/html">&lt;img src=x onerror=alert(1)&gt;</annotation></semantics></math></p>');
  const box = doc.createElement("div");
  box.appendChild(frag);
  assert.equal(box.querySelectorAll("img, maction, annotation-xml, annotation, semantics").length, 0);
  for (const node of box.querySelectorAll("*")) {
    for (const attr of node.attributes) assert.ok(attr.name === "display", `${node.nodeName} keeps ${attr.name}`);
  }
  assert.equal(box.querySelector("math").textContent, "yz");
});

test("math: streamed, an open $ is text until it closes", () => {
  const { doc } = dom();
  const el = doc.createElement("div");
  const md = new StreamingMarkdown(el);
  md.append("so $x^");
  md.flush();
  assert.equal(el.querySelectorAll("math").length, 0);
  assert.equal(el.textContent.trim(), "so $x^");
  md.append("2$ done");
  md.flush(true);
  assert.equal(el.querySelectorAll("math msup").length, 1);
  assert.equal(el.textContent.includes("$"), false);
});

test("a table's last row cut by Stop or an error (the item still streaming, the turn over) is drawn", () => {
  const text = "Results:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | the model was stopped here";
  const want = (doc) => {
    const ref = doc.createElement("div");
    ref.appendChild(htmlToFragment(doc, renderMarkdownHTML(text)));
    return ref.innerHTML;
  };
  for (const status of ["cancelled", "error"]) {
    // a whole render of the turn's last view model
    const a = makeView();
    a.view.render({ id: "t", status, banner: { kind: "muted", text: status }, items: [{ i: 0, kind: "text", status: "streaming", text }] });
    a.view.flush();
    const cell = a.container.querySelector(".mmsp-text tbody tr:last-child td:last-child");
    assert.equal(cell && cell.textContent, "the model was stopped here", `whole render, ${status}`);
    assert.equal(a.container.querySelector(".mmsp-text").innerHTML, want(a.doc));
    // the live ops: the table drawn a row at a time, then the turn ends
    const b = makeView();
    b.view.render({ id: "t", status: "streaming", items: [] });
    b.view.apply([["item", 0, { i: 0, kind: "text", status: "streaming" }], ["append", 0, text.slice(0, 40)]]);
    b.view.flush();
    b.view.apply([["append", 0, text.slice(40)]]);
    b.view.flush();
    assert.ok(!b.container.querySelector(".mmsp-text").textContent.includes("stopped here"), "mid-stream, the partial row waits");
    b.view.apply([["turn", { status, banner: { kind: "muted", text: status } }]]);
    b.view.flush();
    const live = b.container.querySelector(".mmsp-text tbody tr:last-child td:last-child");
    assert.equal(live && live.textContent, "the model was stopped here", `live, ${status}`);
    assert.equal(b.container.querySelector(".mmsp-text").innerHTML, want(b.doc));
  }
});

test("focus on an element of the streaming tail stays on its counterpart when the tail is drawn again", () => {
  const { doc, view, container } = makeView();
  view.render({ id: "t", status: "streaming", items: [] });
  view.apply([["item", 0, { i: 0, kind: "text", status: "streaming" }], ["append", 0, "See [the docs](https://example.com) here:\n\n```py\nprint(1)\n"]]);
  view.flush();
  const copy = container.querySelector(".mmsp-copy-code");
  copy.focus();
  assert.equal(doc.activeElement, copy);
  // the code block goes on: the tail is drawn again
  view.apply([["append", 0, "print(2)\n"]]);
  view.flush();
  assert.ok(!copy.isConnected, "(the button was drawn again)");
  assert.ok(doc.activeElement.classList.contains("mmsp-copy-code") && doc.activeElement.isConnected, "the new Copy button has the focus");
  // a link in the tail, then the tail becomes a stable piece (drawn again with the next one)
  view.apply([["append", 0, "```\n\nNext [link](https://example.org) paragraph"]]);
  view.flush();
  const link = container.querySelector("a[href='https://example.org']");
  link.focus();
  view.apply([["append", 0, " ends.\n\nAnother.\n"]]);
  view.flush();
  assert.ok(!link.isConnected, "(the link was drawn again)");
  assert.equal(doc.activeElement.getAttribute("href"), "https://example.org");
  assert.ok(doc.activeElement.isConnected && container.contains(doc.activeElement));
  // the text set anew without a link: the message keeps the focus, not the page
  view.apply([["set", 0, { text: "Plain words." }]]);
  view.flush();
  const text = container.querySelector(".mmsp-text");
  assert.equal(doc.activeElement, text);
  assert.equal(text.getAttribute("tabindex"), "-1");
  // a whole render of the turn draws every item again
  view.render({ id: "t", status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "Code:\n\n```py\nx = 1\n```\n" }] });
  container.querySelector(".mmsp-insert-code").focus();
  view.render({ id: "t", status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "Code:\n\n```py\nx = 1\n```\n" }] });
  assert.ok(doc.activeElement.classList.contains("mmsp-insert-code") && doc.activeElement.isConnected, "the Insert button drawn again has the focus");
});

test("focus on a formula's neighbour link survives the redraw once the math engine is there", () => {
  const { doc, container } = dom();
  const el = doc.createElement("div");
  container.appendChild(el);
  const md = new StreamingMarkdown(el);
  md.append("A [link](https://example.com) and $x^2$.\n");
  md.flush(true);
  el.querySelector("a").focus();
  md.redraw();
  assert.equal(doc.activeElement.tagName, "A");
  assert.ok(el.contains(doc.activeElement));
});

test("ops: an item whose kind changes (a MIME type after the first delta) is drawn again as its kind", () => {
  const image = { i: 0, kind: "image", status: "done", mime_type: "image/png", src: PNG, tag: "image",
                  meta: "image/png · 70 B", alt: "generated image (image/png)" };
  const whole = makeView();
  whole.view.render({ id: "t", status: "complete", items: [image] });
  for (const op of ["set", "item"]) {
    const live = makeView();
    live.view.apply([["turn", { id: "t", status: "streaming" }],
                     ["item", 0, { kind: "data", status: "streaming", tag: "data", meta: "data", note: "x" }]]);
    live.view.flush();
    assert.equal(live.container.querySelectorAll("img").length, 0);
    const { i, ...fields } = image;
    live.view.apply([[op, i, { ...fields, note: null }], ["turn", { status: "complete" }]]);
    live.view.flush();
    assert.equal(live.container.querySelector("img")?.getAttribute("src"), PNG, op);
    assert.equal(live.container.innerHTML, whole.container.innerHTML, op);
    assert.equal(live.view.viewModel().items[0].note, undefined, op);
  }
});
