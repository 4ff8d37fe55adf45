import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import exploreWidget from "../src/explore.js";
import { fakeModel } from "./fake_model.js";

const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const EVIL = "<script>alert(1)</script> <img src=x onerror=alert(1)>";

const COLUMNS = [["trace_id", "trace", false], ["turn", "turn", true], ["model", "model", false], ["status", "status", false],
  ["finish_reason", "finish", false], ["latency", "latency", true], ["error", "error", false]];

function page(over = {}) {
  return {
    type: "page",
    query: { text: "", model: [], status: [], finish: [], ranges: {}, quick: [], sort: null, desc: false, page: 0, page_size: 25 },
    columns: COLUMNS,
    rows: [
      [0, "complete", "stop", ["c/000", "0", "demo", "complete", "stop", "1.20 s", ""]],
      [1, "error", "", ["c/000", "1", "demo", "error", "", "250 ms", `UpstreamError: ${EVIL}`]],
      [2, "complete", "length", ["c/001", "0", "glm", "complete", "length", "3.40 s", ""]],
    ],
    total: 100000, matched: 3, pages: 1, selected: null,
    summary: "3 of 100,000 turns · answered in 12 ms", page_label: "page 1 of 1",
    facets: { model: [["demo", "demo (2)"], ["glm", "glm (1)"]], status: [["complete", "complete (2)"], ["error", "error (1)"]], finish: [] },
    quick: [["errors", "errors (1)"], ["truncated", "truncated (1)"], ["tool_errors", "tool errors"], ["slow_ttft", "slowest TTFT (2)"]],
    code: 'turns[turns["status"] != "complete"]',
    took_ms: 12,
    ranges: ["latency", "ttft"],
    ...over,
  };
}

function turnVm(text) {
  return {
    id: "t1", model: "demo", status: "complete",
    items: [{ i: 0, kind: "text", status: "done", text }],
    banner: null,
    footer: { stats: [["tokens", "tokens prompt 3 · response 4"], ["ttft", "TTFT 120 ms"]] },
  };
}

function detail() {
  return {
    type: "detail", row: 1, title: "c/000 · turn 1", selected: "f0", index: null, replayable: false,
    source: "/x/c/000.json · /x/c/000.timing.jsonl", notes: [],
    entries: [
      { kind: "user", key: "m0", label: "user · message 0", text: EVIL, images: [{ src: PNG, alt: "attached image" }, { src: "javascript:alert(1)", alt: "x" }], notes: [] },
      { kind: "assistant", key: "m1", label: "assistant · turn 0", vm: turnVm("**hello** " + EVIL), lines: ["timing: text 1.00 s"], notes: [] },
      { kind: "failed", key: "f0", label: "assistant · turn 1 · error (sidecar only)", vm: { status: "error", items: [], banner: { kind: "error", lead: "UpstreamError: ", text: EVIL }, footer: null }, note: "arrived before it ended: text 12" },
      { kind: "damaged", key: "m3", label: "message 3", text: "message 3 is damaged: " + EVIL },
    ],
    waterfall: {
      key: "f0", status: "error", summary: "total 250 ms · error",
      bars: [{ kind: "wait", label: "waiting for the first token", left: 0, width: 40, text: "0 ms → 100 ms (100 ms)", selected: true },
        { kind: "text", label: "text (cut off: error)", left: 40, width: 60, text: "100 ms → 250 ms (150 ms)", selected: true },
        { kind: "<b>", label: EVIL, left: "12%; background:url(x)", width: 5, text: "x" }],
      ticks: [{ left: 0, text: "0 ms" }, { left: 40, text: "100 ms" }],
    },
  };
}

function setup() {
  const jsdom = new JSDOM("<!doctype html><html><body></body></html>");
  const win = jsdom.window;
  const el = win.document.createElement("div");
  win.document.body.appendChild(el);
  const model = fakeModel();
  const dispose = exploreWidget.render({ model, el });
  const q = (s) => el.querySelector(s);
  const qa = (s) => [...el.querySelectorAll(s)];
  return { win, el, model, dispose, q, qa };
}

function noScript(el) {
  assert.equal(el.querySelectorAll("script, iframe, svg").length, 0);
  for (const node of el.querySelectorAll("*")) {
    for (const a of node.attributes) {
      assert.ok(!/^on/i.test(a.name), `${node.tagName} ${a.name}`);
      if (a.name === "src" || a.name === "href") assert.ok(!/^\s*javascript:/i.test(a.value), a.value);
    }
  }
}

test("explore: says hello and draws the page the kernel sent, every number as written", () => {
  const { model, q, qa, el } = setup();
  assert.deepEqual(model.sent, [{ type: "hello" }]);
  model.custom({ type: "state", page: page(), detail: { type: "detail", row: null } });
  assert.equal(qa(".mmsp-x-table tbody tr").length, 3);
  assert.deepEqual(qa(".mmsp-x-table thead th").map((th) => th.textContent), COLUMNS.map((c) => c[1]));
  const cells = qa(".mmsp-x-table tbody tr:nth-child(2) td").map((td) => td.textContent);
  assert.deepEqual(cells.slice(0, 6), ["c/000", "1", "demo", "error", "", "250 ms"]);
  assert.equal(cells[6], `UpstreamError: ${EVIL}`, "an error is text");
  assert.equal(q(".mmsp-x-table tbody tr:nth-child(2)").dataset.status, "error");
  assert.equal(q(".mmsp-x-summary").textContent, "3 of 100,000 turns · answered in 12 ms");
  assert.equal(q(".mmsp-x-page").textContent, "page 1 of 1");
  assert.deepEqual(qa(".mmsp-x-chip").map((b) => b.textContent), ["errors (1)", "truncated (1)", "tool errors", "slowest TTFT (2)"]);
  assert.deepEqual(qa("[data-facet=model] option").map((o) => o.textContent), ["all models", "demo (2)", "glm (1)", "type a value…"]);
  assert.ok(q(".mmsp-x-prev").disabled && q(".mmsp-x-next").disabled);
  assert.equal(q(".mmsp-x-replay").disabled, true);
  noScript(el);
});

test("explore: controls ask the kernel, which answers with a page", async () => {
  const { model, q, qa, win } = setup();
  model.custom({ type: "page", ...page() });
  const last = () => model.sent.at(-1);
  qa(".mmsp-x-chip")[0].click();
  assert.deepEqual(last(), { type: "query", patch: { quick: ["errors"], page: 0 } });
  assert.equal(q(".mmsp-x-summary").dataset.busy, "true");
  model.custom(page({ query: { ...page().query, quick: ["errors"] } }));
  assert.equal(q(".mmsp-x-summary").dataset.busy, undefined);
  assert.equal(qa(".mmsp-x-chip")[0].getAttribute("aria-pressed"), "true");
  qa(".mmsp-x-chip")[0].click();
  assert.deepEqual(last().patch.quick, [], "pressing it again turns it off");
  q(".mmsp-x-sort[data-col=latency]").click();
  assert.deepEqual(last(), { type: "query", patch: { sort: "latency", desc: true, page: 0 } }, "numbers sort most first");
  q(".mmsp-x-sort[data-col=model]").click();
  assert.deepEqual(last().patch, { sort: "model", desc: false, page: 0 });
  const facet = q("[data-facet=model]");
  facet.value = "glm";
  facet.dispatchEvent(new win.Event("change"));
  assert.deepEqual(last().patch, { model: ["glm"], page: 0 });
  q(".mmsp-x-range-col").value = "latency";
  const lo = q(".mmsp-x-range-input");
  lo.value = "10";
  lo.dispatchEvent(new win.Event("change"));
  assert.deepEqual(last().patch, { ranges: { latency: [10, null] }, page: 0 });
  const search = q(".mmsp-x-search");
  search.value = "latency>10 model:demo";
  search.dispatchEvent(new win.Event("input"));
  const before = model.sent.length;
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(model.sent.length, before + 1, "typing is debounced into one query");
  assert.deepEqual(last().patch, { text: "latency>10 model:demo", page: 0 });
  model.custom(page({ pages: 3, page_label: "page 1 of 3" }));
  q(".mmsp-x-next").click();
  assert.deepEqual(last().patch, { page: 1 });
  q(".mmsp-x-last").click();
  assert.deepEqual(last().patch, { page: 2 });
  const size = q(".mmsp-x-size");
  size.value = "100";
  size.dispatchEvent(new win.Event("change"));
  assert.deepEqual(last().patch, { page_size: 100, page: 0 });
  model.custom({ type: "error", error: "OptionError: latency: 'soon' is not a number" });
  assert.ok(q(".mmsp-x-summary").classList.contains("mmsp-error"));
  assert.match(q(".mmsp-x-summary").textContent, /not a number/);
});

test("explore: a row selects, and its conversation, waterfall and replay are drawn", () => {
  const { model, q, qa, el } = setup();
  model.custom({ type: "state", page: page(), detail: { type: "detail", row: null } });
  const row = qa(".mmsp-x-table tbody tr")[1];
  row.click();
  assert.deepEqual(model.sent.at(-1), { type: "select", row: 1 });
  assert.equal(row.getAttribute("aria-selected"), "true");
  const key = new el.ownerDocument.defaultView.KeyboardEvent("keydown", { key: "Enter", bubbles: true });
  qa(".mmsp-x-table tbody tr")[2].dispatchEvent(key);
  assert.deepEqual(model.sent.at(-1), { type: "select", row: 2 });
  model.custom(detail());
  assert.equal(q(".mmsp-x-detail-title").textContent, "c/000 · turn 1");
  assert.deepEqual(qa(".mmsp-conv-msg").map((s) => s.dataset.key), ["m0", "m1", "f0", "m3"]);
  assert.ok(q(".mmsp-conv-msg[data-key=f0]").classList.contains("mmsp-conv-selected"));
  assert.equal(q(".mmsp-conv-user-text").textContent, EVIL);
  assert.equal(qa(".mmsp-conv-user img").length, 1, "only a data: image is shown");
  assert.equal(q(".mmsp-conv-assistant .mmsp-text strong").textContent, "hello");
  assert.equal(q(".mmsp-conv-failed .mmsp-banner-lead").textContent, "UpstreamError: ");
  assert.equal(q(".mmsp-conv-failed .mmsp-banner-text").textContent, EVIL);
  assert.equal(q(".mmsp-conv-timing").textContent, "timing: text 1.00 s");
  const bars = qa(".mmsp-x-wf-bar");
  assert.deepEqual(bars.slice(0, 2).map((b) => [b.style.left, b.style.width]), [["0%", "40%"], ["40%", "60%"]]);
  assert.equal(bars[2].style.left, "0%", "a position that is not a number is not styled");
  assert.ok(qa(".mmsp-x-wf-row")[2].classList.contains("mmsp-x-wf-data"));
  assert.equal(qa(".mmsp-x-wf-label")[2].textContent, EVIL);
  assert.equal(q(".mmsp-x-replay").disabled, true, "a response never recorded cannot be replayed");
  noScript(el);
  // a recorded one can: Replay sends the speed, the kernel streams ops into the replay area
  model.custom({ ...detail(), selected: "m1", index: 1, replayable: true, waterfall: null });
  assert.match(q(".mmsp-x-waterfall").textContent, /no timing sidecar/);
  assert.equal(q(".mmsp-x-replay").disabled, false);
  q(".mmsp-x-speed").value = "10";
  q(".mmsp-x-replay").click();
  assert.deepEqual(model.sent.at(-1), { type: "replay", speed: 10 });
  model.custom({ type: "replay", phase: "start", title: "replay of c/000 · turn 0 at 10×" });
  assert.equal(q(".mmsp-x-replay-area").hidden, false);
  assert.equal(q(".mmsp-x-stop").hidden, false);
  model.custom({ type: "replay", phase: "ops", ops: [["item", 0, { kind: "text", status: "streaming" }], ["append", 0, "hel"]] });
  model.custom({ type: "replay", phase: "end", vm: turnVm("hello") });
  assert.equal(q(".mmsp-x-replay-area .mmsp-text").textContent.trim(), "hello");
  assert.equal(q(".mmsp-x-stop").hidden, true);
  model.custom({ type: "detail", row: 4, title: "c/009 · turn 0", error: "TraceError: /x/c/009.json: not valid JSON" });
  assert.match(q(".mmsp-conv-damaged-text").textContent, /not valid JSON/);
  assert.equal(q(".mmsp-x-replay").disabled, true);
});

test("explore: dispose removes every listener and the DOM", () => {
  const { model, el, dispose } = setup();
  model.custom({ type: "state", page: page(), detail: detail() });
  assert.ok(model.listeners() > 0);
  dispose();
  assert.equal(model.listeners(), 0);
  assert.equal(el.children.length, 0);
  assert.ok(!el.classList.contains("mmsp-explorer"));
});

test("explore: keys pressed in the explorer (search, rows, pickers) never reach the notebook", () => {
  const { win, model, q } = setup();
  model.custom({ type: "state", page: page(), detail: { type: "detail", row: null } });
  const reached = [];
  win.document.addEventListener("keydown", (e) => reached.push(e.key));
  const key = (target, init) => target.dispatchEvent(new win.KeyboardEvent("keydown", { bubbles: true, cancelable: true, ...init }));
  for (const target of [q(".mmsp-x-search"), q(".mmsp-x-table tbody tr"), q(".mmsp-x-facet"), q(".mmsp-x-copy")]) {
    for (const k of ["d", "m", "Escape"]) key(target, { key: k });
    key(target, { key: "Enter", shiftKey: true });
    assert.equal(target.getAttribute("data-lm-suppress-shortcuts"), "true", target.className);
    key(target, { key: "s", ctrlKey: true });
    assert.equal(target.hasAttribute("data-lm-suppress-shortcuts"), false);
  }
  assert.deepEqual(reached, ["s", "s", "s", "s"]);
});

test("explore: the sort header, quick filter or row that had the focus keeps it when the page is redrawn", () => {
  const { model, q, qa, win, el } = setup();
  model.custom({ type: "state", page: page(), detail: { type: "detail", row: null } });
  const doc = win.document;
  q(".mmsp-x-sort[data-col=latency]").focus();
  q(".mmsp-x-sort[data-col=latency]").click();
  model.custom(page({ query: { ...page().query, sort: "latency", desc: true } }));
  assert.equal(doc.activeElement, q(".mmsp-x-sort[data-col=latency]"), "keys pressed next stay in the explorer");
  qa(".mmsp-x-chip")[1].focus();
  qa(".mmsp-x-chip")[1].click();
  model.custom(page({ query: { ...page().query, quick: ["truncated"] } }));
  assert.equal(doc.activeElement, q(".mmsp-x-chip[data-quick=truncated]"));
  qa(".mmsp-x-table tbody tr")[2].focus();
  model.custom(page());
  assert.equal(doc.activeElement, q(".mmsp-x-table tbody tr[data-row='2']"));
  model.custom(page({ rows: page().rows.slice(0, 1) })); // the row is gone: the table keeps the focus
  assert.ok(el.contains(doc.activeElement));
});

test("explore: a picker's empty value is picked as itself, not as 'any'", () => {
  const { model, q, win } = setup();
  const finish = [["stop", "stop (2)"], ["", "(empty) (1)"]];
  model.custom({ type: "state", page: page({ facets: { ...page().facets, finish } }), detail: { type: "detail", row: null } });
  const sel = q("[data-facet=finish]");
  sel.selectedIndex = 2;
  sel.dispatchEvent(new win.Event("change"));
  assert.deepEqual(model.sent.at(-1).patch, { finish: [""], page: 0 });
  model.custom(page({ query: { ...page().query, finish: [""] }, facets: { ...page().facets, finish } }));
  assert.equal(sel.selectedIndex, 2);
  sel.selectedIndex = 0;
  sel.dispatchEvent(new win.Event("change"));
  assert.deepEqual(model.sent.at(-1).patch, { finish: [], page: 0 });
  model.custom(page({ facets: { ...page().facets, finish } }));
  assert.equal(sel.selectedIndex, 0);
});

test("explore: the rows are one Tab stop (the selected row, else the first); arrows, Home and End move in them", () => {
  const { model, qa, win } = setup();
  model.custom({ type: "state", page: page({ selected: 1 }), detail: { type: "detail", row: null } });
  const rows = () => qa(".mmsp-x-table tbody tr");
  const stops = () => rows().filter((r) => r.tabIndex === 0).map((r) => r.dataset.row);
  assert.deepEqual(stops(), ["1"]);
  const key = (k) => win.document.activeElement.dispatchEvent(new win.KeyboardEvent("keydown", { key: k, bubbles: true, cancelable: true }));
  rows()[1].focus();
  key("End");
  assert.equal(win.document.activeElement, rows()[2]);
  assert.deepEqual(stops(), ["2"], "Tab comes back to the row left");
  key("Home");
  assert.equal(win.document.activeElement, rows()[0]);
  key("ArrowDown");
  assert.equal(win.document.activeElement, rows()[1]);
  assert.deepEqual(stops(), ["1"]);
  model.custom(page());
  assert.deepEqual(stops(), ["1"], "the row with the focus stays the stop");
  win.document.activeElement.blur();
  model.custom(page());
  assert.deepEqual(stops(), ["0"]);
});

// a conversation cut into blocks: user m0 (block 0), a turn m1 of 4 steps (blocks 1-4), user m9, assistant m10
const stepItems = (s) => [{ i: 2 * s, kind: "text", status: "done", text: `step ${s} says`, step: s },
  { i: 2 * s + 1, kind: "tool_call", status: "done", name: `tool${s}`, args: "{}", state: "done", step: s }];

function windowed() {
  return {
    type: "detail", row: 7, title: "c/010 · turn 2", selected: "m1", selected_step: 2, index: 5, replayable: true,
    source: "/x/c/010.json", notes: [], blocks: 7, window: [2, 4], outline: "2 user messages · 2 assistant turns (5 steps)",
    entries: [{ kind: "assistant", key: "m1", label: "assistant · turn 0–3 (4 steps)", steps: [1, 3, 4],
      vm: { status: "complete", items: [...stepItems(1), ...stepItems(2)], footer: null }, lines: ["step 2: a", "step 3: b"], notes: [] }],
    waterfall: null,
  };
}

test("explore: a long conversation comes in windows around the selected steps, more on request", () => {
  const { model, q, qa, el } = setup();
  model.custom({ type: "state", page: page(), detail: windowed() });
  assert.equal(q(".mmsp-x-outline").textContent, "2 user messages · 2 assistant turns (5 steps)");
  assert.deepEqual(qa(".mmsp-conv-msg").map((s) => s.dataset.key), ["m1"]);
  const texts = () => qa(".mmsp-conv-selected .mmsp-text").map((t) => t.textContent.trim());
  assert.deepEqual(texts(), ["step 1 says", "step 2 says"]);
  // the buttons sit inside the turn, beside its steps drawn
  const before = q(".mmsp-x-more-before");
  const after = q(".mmsp-x-more-after");
  assert.equal(before.parentElement.dataset.key, "m1");
  assert.equal(after.parentElement.dataset.key, "m1");
  assert.match(before.textContent, /Show earlier \(2 more\)/);
  assert.match(after.textContent, /Show later \(3 more\)/);
  before.click();
  assert.deepEqual(model.sent.at(-1), { type: "more", row: 7, before: 2 });
  before.click();
  assert.equal(model.sent.filter((m) => m.type === "more").length, 1, "one request at a time");
  model.custom({ type: "more", row: 99, window: [0, 2], entries: [] }); // another row's answer: ignored
  model.custom({ type: "more", row: 7, window: [0, 2], entries: [
    { kind: "user", key: "m0", label: "user · message 0", text: EVIL, images: [], notes: [] },
    { kind: "assistant", key: "m1", steps: [0, 1, 4], vm: { items: stepItems(0) }, lines: ["step 1: z"] }] });
  assert.deepEqual(qa(".mmsp-conv-msg").map((s) => s.dataset.key), ["m0", "m1"]);
  assert.deepEqual(texts(), ["step 0 says", "step 1 says", "step 2 says"], "earlier steps drawn before");
  assert.deepEqual(qa(".mmsp-conv-selected .mmsp-conv-timing").map((l) => l.textContent), ["step 1: z", "step 2: a", "step 3: b"]);
  assert.equal(q(".mmsp-conv-user-text").textContent, EVIL, "an entry sent later is drawn as text");
  assert.equal(q(".mmsp-x-more-before"), null, "nothing earlier left");
  q(".mmsp-x-more-after").click();
  assert.deepEqual(model.sent.at(-1), { type: "more", row: 7, after: 4 });
  model.custom({ type: "error", error: "OptionError: no" }); // refused: the button asks again
  q(".mmsp-x-more-after").click();
  assert.deepEqual(model.sent.at(-1), { type: "more", row: 7, after: 4 });
  model.custom({ type: "more", row: 7, window: [4, 7], entries: [
    { kind: "assistant", key: "m1", steps: [3, 4, 4], vm: { items: stepItems(3) }, lines: ["step 4: y"] },
    { kind: "user", key: "m9", label: "user · message 9", text: "next", images: [], notes: [] },
    { kind: "assistant", key: "m10", label: "assistant · turn 4", vm: turnVm("last"), lines: [], notes: [] }] });
  assert.deepEqual(qa(".mmsp-conv-msg").map((s) => s.dataset.key), ["m0", "m1", "m9", "m10"]);
  assert.deepEqual(texts(), ["step 0 says", "step 1 says", "step 2 says", "step 3 says"]);
  assert.equal(qa(".mmsp-conv-selected .mmsp-tool").length, 4);
  assert.equal(qa(".mmsp-x-more").length, 0, "the whole conversation drawn");
  assert.equal(q(".mmsp-conv-msg[data-key=m10] .mmsp-text").textContent.trim(), "last");
  noScript(el);
});

test("explore: Show later / Show earlier and Stop, redrawn or hidden once used, keep the focus in the explorer", () => {
  const { model, q, el, win } = setup();
  const doc = win.document;
  model.custom({ type: "state", page: page(), detail: windowed() });
  const after = q(".mmsp-x-more-after");
  after.focus();
  after.click();
  assert.deepEqual(model.sent.at(-1), { type: "more", row: 7, after: 4 });
  // waiting for the answer, the button says it is unavailable but stays focusable (a disabled
  // button drops the focus in the browser)
  assert.equal(after.disabled, false);
  assert.equal(after.getAttribute("aria-disabled"), "true");
  after.click();
  assert.equal(model.sent.filter((m) => m.type === "more").length, 1, "one request at a time");
  model.custom({ type: "more", row: 7, window: [4, 5], entries: [
    { kind: "assistant", key: "m1", steps: [3, 4, 4], vm: { items: stepItems(3) }, lines: ["step 4: y"] }] });
  assert.equal(after.isConnected, false);
  assert.equal(doc.activeElement, q(".mmsp-x-more-after"), "the new Show later button has the focus");
  q(".mmsp-x-more-after").click();
  model.custom({ type: "more", row: 7, window: [5, 7], entries: [
    { kind: "user", key: "m9", label: "user · message 9", text: "next", images: [], notes: [] },
    { kind: "assistant", key: "m10", label: "assistant · turn 4", vm: turnVm("last"), lines: [], notes: [] }] });
  assert.equal(q(".mmsp-x-more-after"), null);
  assert.equal(doc.activeElement, q(".mmsp-x-conversation"), "nothing later: the conversation has the focus");
  // the replay's Stop hides when the replay ends: the focus goes to Replay
  q(".mmsp-x-replay").click();
  model.custom({ type: "replay", phase: "start", title: "replay" });
  q(".mmsp-x-stop").focus();
  q(".mmsp-x-stop").click();
  assert.deepEqual(model.sent.at(-1), { type: "stop" });
  model.custom({ type: "replay", phase: "end", vm: turnVm("hello") });
  assert.equal(q(".mmsp-x-stop").hidden, true);
  assert.equal(doc.activeElement, q(".mmsp-x-replay"));
  assert.ok(el.contains(doc.activeElement));
});

test("explore: a picker shows a long value cut, its title longer, and takes a value typed", () => {
  const { model, q, qa, win } = setup();
  const long = "m".repeat(200) + "… (100,000 characters)";
  const facets = { ...page().facets, model: [["demo", "demo (2)", ""], [long, "m".repeat(79) + "… (9)", long]] };
  model.custom({ type: "state", page: page({ facets, facet_other: { model: "type a value… (2,900 more values)" } }), detail: { type: "detail", row: null } });
  const sel = q("select[data-facet=model]");
  const options = qa("select[data-facet=model] option");
  assert.deepEqual(options.map((o) => o.textContent), ["all models", "demo (2)", "m".repeat(79) + "… (9)", "type a value… (2,900 more values)"]);
  assert.equal(options[1].title, "", "a short value has no title");
  assert.equal(options[2].title, long);
  sel.selectedIndex = 2;
  sel.dispatchEvent(new win.Event("change"));
  assert.deepEqual(model.sent.at(-1), { type: "query", patch: { model: [long], page: 0 } }, "the value as sent, the kernel knows it");
  const field = q("input[data-facet=model]");
  assert.equal(field.hidden, true);
  const sent = model.sent.length;
  sel.selectedIndex = 3;
  sel.dispatchEvent(new win.Event("change"));
  assert.equal(model.sent.length, sent, "choosing 'type a value' asks nothing yet");
  assert.equal(field.hidden, false);
  assert.equal(win.document.activeElement, field);
  const key = (k) => field.dispatchEvent(new win.KeyboardEvent("keydown", { key: k, bubbles: true, cancelable: true }));
  field.value = "rare-model-7";
  key("Enter");
  assert.deepEqual(model.sent.at(-1), { type: "query", patch: { model: ["rare-model-7"], page: 0 } });
  assert.equal(field.hidden, true);
  // the page that answers offers it picked
  model.custom(page({ query: { ...page().query, model: ["rare-model-7"] }, facets: { ...facets, model: [...facets.model, ["rare-model-7", "rare-model-7", ""]] } }));
  assert.equal(sel.options[sel.selectedIndex].textContent, "rare-model-7");
  sel.selectedIndex = sel.options.length - 1;
  sel.dispatchEvent(new win.Event("change"));
  field.value = "half typed";
  key("Escape");
  assert.equal(field.hidden, true);
  assert.equal(sel.options[sel.selectedIndex].textContent, "rare-model-7", "Escape leaves the pick as it was");
  assert.equal(model.sent.at(-1).patch.model[0], "rare-model-7");
});

test("explore: Copy filter copies the page's code, or asks the kernel for a code too long to come with each page", async () => {
  const { model, q, win } = setup();
  const copied = [];
  Object.defineProperty(win.navigator, "clipboard", { value: { writeText: async (t) => { copied.push(t); } }, configurable: true });
  model.custom({ type: "state", page: page(), detail: { type: "detail", row: null } });
  const settle = () => new Promise((r) => setTimeout(r, 0));
  q(".mmsp-x-copy").click();
  await settle();
  assert.deepEqual(copied, ['turns[turns["status"] != "complete"]']);
  const sent = model.sent.length;
  model.custom(page({ code: null }));
  q(".mmsp-x-copy").click();
  assert.deepEqual(model.sent.slice(sent), [{ type: "code" }], "asked of the kernel");
  await settle();
  assert.equal(copied.length, 1, "nothing copied before the answer");
  const long = 'turns[turns["model"] == "' + "h".repeat(100_000) + '"]';
  model.custom({ type: "code", code: long });
  await settle();
  assert.deepEqual(copied.slice(1), [long]);
  // a code nobody asked for (another view's Copy) is not copied here
  model.custom({ type: "code", code: "turns" });
  await settle();
  assert.equal(copied.length, 2);
});

test("explore: with its kernel gone (restarted), a click says so in the summary line instead of throwing", () => {
  const { model, q, qa, win, dispose } = setup();
  model.custom({ type: "state", page: page(), detail: { type: "detail", row: null } });
  model.send = () => {
    throw new Error("Cannot send"); // (what JupyterLab's widget model does once its kernel restarted)
  };
  qa(".mmsp-x-table tbody tr")[1].click();
  const summary = q(".mmsp-x-summary");
  assert.match(summary.textContent, /no longer connected to a kernel: run its cell again/);
  assert.ok(summary.classList.contains("mmsp-error"));
  assert.equal(summary.dataset.busy, undefined);
  for (const b of [q(".mmsp-x-next"), q(".mmsp-x-chip"), q(".mmsp-x-copy")]) b.click();
  const search = q(".mmsp-x-search");
  search.value = "demo";
  search.dispatchEvent(new win.KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
  assert.equal(summary.dataset.busy, undefined, "not left waiting for an answer that cannot come");
  assert.match(summary.textContent, /run its cell again/);
  dispose();
});
