import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import chatWidget, { keepTranscript } from "../src/chat.js";
import turnWidget from "../src/turn.js";
import { fakeModel } from "./fake_model.js";

const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

function setup(traits = {}) {
  const jsdom = new JSDOM("<!doctype html><html><body></body></html>");
  const win = jsdom.window;
  const el = win.document.createElement("div");
  win.document.body.appendChild(el);
  const model = fakeModel({
    transcript: [],
    busy: false,
    models: ["demo", "demo-fast"],
    model: "demo",
    thinking: "low",
    thinking_levels: ["off", "low", "high"],
    error: "",
    ...traits,
  });
  const forget = chatWidget.initialize({ model }); // (anywidget: once per model, before any view)
  const disposeView = chatWidget.render({ model, el });
  const dispose = () => {
    disposeView();
    forget();
  };
  const q = (s) => el.querySelector(s);
  const key = (target, init) => {
    const e = new win.KeyboardEvent("keydown", { bubbles: true, cancelable: true, ...init });
    target.dispatchEvent(e);
    return e;
  };
  return { win, el, model, dispose, q, key };
}

/** A send message without its id (a string, new for each message: the kernel names it in a refusal). */
function sendOf(msg) {
  const { id, ...rest } = msg;
  assert.equal(typeof id, "string");
  return rest;
}

async function until(cond, ms = 2000) {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("chat: says hello, fills the pickers and binds them to the model/thinking traits", () => {
  const { model, q } = setup();
  assert.deepEqual(model.sent, [{ type: "hello" }]);
  const sel = q(".mmsp-model-select");
  assert.deepEqual([...sel.options].map((o) => o.value), ["demo", "demo-fast"]);
  assert.equal(sel.value, "demo");
  sel.value = "demo-fast";
  sel.dispatchEvent(new sel.ownerDocument.defaultView.Event("change", { bubbles: true }));
  assert.equal(model.get("model"), "demo-fast");
  assert.deepEqual(model.sent.at(-1), { type: "pick", model: "demo-fast" });
  const th = q(".mmsp-thinking-select");
  assert.equal(th.value, "low");
  th.value = "high";
  th.dispatchEvent(new th.ownerDocument.defaultView.Event("change", { bubbles: true }));
  assert.equal(model.get("thinking"), "high");
  assert.deepEqual(model.sent.at(-1), { type: "pick", thinking: "high" });
  assert.equal(model.saved, 0, "a message, not save_changes: that would send the model's transcript too");
  // Python changes the trait: the picker follows
  model.update("model", "demo");
  assert.equal(sel.value, "demo");
  model.update("models", ["a", "b"]);
  assert.deepEqual([...sel.options].map((o) => o.value), ["demo", "a", "b"], "the current model stays selectable");
  model.update("thinking_levels", []);
  assert.equal(th.closest("label").hidden, true);
});

test("chat: Enter sends, Shift+Enter does not", () => {
  const { model, q, key } = setup();
  const input = q("textarea.mmsp-input");
  input.value = "hello <b>there</b>";
  const shift = key(input, { key: "Enter", shiftKey: true });
  assert.equal(shift.defaultPrevented, false, "Shift+Enter inserts a newline");
  assert.equal(model.sent.filter((m) => m.type === "send").length, 0);
  const enter = key(input, { key: "Enter" });
  assert.equal(enter.defaultPrevented, true);
  assert.deepEqual(sendOf(model.sent.at(-1)), { type: "send", text: "hello <b>there</b>", images: [] });
  assert.equal(input.value, "");
  // empty input: nothing sent
  key(input, { key: "Enter" });
  assert.equal(model.sent.filter((m) => m.type === "send").length, 1);
  // while composing with an IME, Enter is not a send
  input.value = "x";
  key(input, { key: "Enter", isComposing: true });
  assert.equal(model.sent.filter((m) => m.type === "send").length, 1);
});

test("chat: Send becomes Stop while busy", () => {
  const { model, q, key } = setup();
  const btn = q("button.mmsp-send");
  assert.equal(btn.textContent, "Send");
  assert.equal(btn.tagName, "BUTTON");
  model.update("busy", true);
  assert.equal(btn.textContent, "Stop");
  assert.equal(btn.getAttribute("aria-label"), "Stop generating");
  btn.click();
  assert.deepEqual(model.sent.at(-1), { type: "stop" });
  // Enter while busy does not send
  q("textarea").value = "queued";
  key(q("textarea"), { key: "Enter" });
  assert.equal(model.sent.filter((m) => m.type === "send").length, 0);
  // ... and says why, the message kept in the box
  assert.equal(q(".mmsp-composer-note").hidden, false);
  assert.match(q(".mmsp-composer-note").textContent, /reply is streaming: your message stays here/);
  assert.equal(q("textarea").value, "queued");
  key(q("textarea"), { key: "Escape" });
  assert.deepEqual(model.sent.at(-1), { type: "stop" });
  model.update("busy", false);
  assert.equal(btn.textContent, "Send");
  assert.equal(q(".mmsp-composer-note").hidden, true, "the note goes when the reply ends");
  btn.click();
  assert.deepEqual(sendOf(model.sent.at(-1)), { type: "send", text: "queued", images: [] });
});

test("chat: transcript, live ops, and a retry button on the last failed turn", () => {
  const { model, q, el } = setup();
  const user = { role: "user", text: "<script>alert(1)</script> hi", images: [PNG, "data:image/svg+xml;base64,AAAA"] };
  model.update("busy", true);
  model.update("transcript", [user]);
  assert.equal(el.querySelectorAll(".mmsp-msg-user").length, 1);
  assert.equal(q(".mmsp-user-text").textContent, "<script>alert(1)</script> hi");
  assert.equal(el.querySelectorAll("script").length, 0);
  assert.equal(el.querySelectorAll(".mmsp-thumbs img").length, 1, "svg attachment not shown");
  // the live turn at index 1
  model.custom({ type: "ops", turn: 1, ops: [["turn", { status: "streaming", banner: { kind: "streaming", text: "streaming…" } }], ["item", 0, { kind: "text", status: "streaming" }], ["append", 0, "Partial answer"]] });
  const live = el.querySelectorAll(".mmsp-msg-assistant");
  assert.equal(live.length, 1);
  assert.ok(live[0].querySelector(".mmsp-streaming"));
  const banner = { kind: "error", lead: "UpstreamError: ", text: "boom" };
  model.custom({ type: "ops", turn: 1, ops: [["turn", { status: "error", banner }]] });
  assert.match(live[0].querySelector(".mmsp-status").textContent, /boom/);
  assert.equal(live[0].querySelector(".mmsp-text").textContent.trim(), "Partial answer");
  // busy still true: no retry yet
  assert.equal(q(".mmsp-retry").hidden, true);
  const finalTurn = { id: "t1", status: "error", items: [{ i: 0, kind: "text", status: "streaming", text: "Partial answer" }], banner, footer: null };
  model.update("transcript", [user, { role: "assistant", turn: finalTurn }]);
  model.update("busy", false);
  const assistants = el.querySelectorAll(".mmsp-msg-assistant");
  assert.equal(assistants.length, 1, "the live view joined the transcript");
  assert.equal(assistants[0], live[0], "and was kept, not redrawn");
  const retry = assistants[0].querySelector("button.mmsp-retry");
  assert.equal(retry.hidden, false);
  retry.click();
  assert.deepEqual(model.sent.at(-1), { type: "retry" });

  // a later successful turn: only the last assistant turn can offer retry
  model.update("transcript", [
    user,
    { role: "assistant", turn: finalTurn },
    { role: "user", text: "again", images: [] },
    { role: "assistant", turn: { status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "ok" }], footer: null } },
  ]);
  const buttons = [...el.querySelectorAll("button.mmsp-retry")];
  assert.equal(buttons.length, 2);
  assert.ok(buttons.every((b) => b.hidden));
  // cancelled last turn → retry
  model.update("transcript", [user, { role: "assistant", turn: { ...finalTurn, status: "cancelled" } }]);
  assert.equal(el.querySelectorAll(".mmsp-msg").length, 2);
  assert.equal(q("button.mmsp-retry").hidden, false);
});

test("chat: paste of an image adds an attachment that is sent, and can be removed", async () => {
  const { win, model, q, el, key } = setup();
  const input = q("textarea");
  const bytes = Uint8Array.from(Buffer.from(PNG.split(",")[1], "base64"));
  const paste = (type) => {
    const file = new win.File([bytes], "shot.png", { type });
    const e = new win.Event("paste", { bubbles: true, cancelable: true });
    Object.defineProperty(e, "clipboardData", {
      value: { items: [{ kind: "file", type, getAsFile: () => file }], types: ["Files"], files: [file] },
    });
    input.dispatchEvent(e);
    return e;
  };
  const e = paste("image/png");
  assert.equal(e.defaultPrevented, true);
  await until(() => el.querySelectorAll(".mmsp-attachment img").length === 1);
  const img = q(".mmsp-attachment img");
  assert.match(img.getAttribute("src"), /^data:image\/png;base64,/);
  assert.equal(q(".mmsp-attachment button").getAttribute("aria-label"), "Remove image 1");
  // an svg is refused
  paste("image/svg+xml");
  await until(() => !q(".mmsp-composer-note").hidden);
  assert.equal(el.querySelectorAll(".mmsp-attachment").length, 1);
  // a second png, then remove it
  paste("image/png");
  await until(() => el.querySelectorAll(".mmsp-attachment").length === 2);
  el.querySelectorAll(".mmsp-attachment button")[1].click();
  assert.equal(el.querySelectorAll(".mmsp-attachment").length, 1);
  // an image alone can be sent
  key(input, { key: "Enter" });
  const sent = model.sent.at(-1);
  assert.equal(sent.type, "send");
  assert.equal(sent.text, "");
  assert.equal(sent.images.length, 1);
  assert.match(sent.images[0], /^data:image\/png;base64,/);
  assert.equal(el.querySelectorAll(".mmsp-attachment").length, 0);
});

test("chat: error banner, new chat, chat_snapshot with a live turn, cleanup", () => {
  const { model, q, el, dispose } = setup({ error: "<img src=x onerror=alert(1)> no key" });
  assert.equal(q(".mmsp-chat-error").hidden, false);
  assert.equal(q(".mmsp-chat-error-text").textContent, "<img src=x onerror=alert(1)> no key");
  assert.equal(el.querySelectorAll("img").length, 0);
  model.update("error", "");
  assert.equal(q(".mmsp-chat-error").hidden, true);
  q("button.mmsp-new-chat").click();
  assert.deepEqual(model.sent.at(-1), { type: "new_chat" });
  model.custom({
    type: "chat_snapshot",
    chat: {
      transcript: [{ role: "user", text: "q", images: [] }],
      live: { status: "streaming", items: [{ i: 0, kind: "thinking", status: "streaming", text: "hmm", label: "Thinking…" }] },
    },
  });
  assert.equal(el.querySelectorAll(".mmsp-msg").length, 2);
  assert.equal(q(".mmsp-msg-assistant .mmsp-summary-label").textContent, "Thinking…");
  // ops for the same live turn continue it
  model.custom({ type: "ops", turn: 1, ops: [["append", 0, " more"]] });
  assert.equal(q(".mmsp-thinking-body").textContent, "hmm more");
  assert.ok(model.listeners() > 0);
  dispose();
  assert.equal(model.listeners(), 0);
  assert.equal(el.children.length, 0);
});

test("turn widget: hello, snapshot, ops, final trait, cleanup", () => {
  const jsdom = new JSDOM("<!doctype html><html><body></body></html>");
  const el = jsdom.window.document.createElement("div");
  jsdom.window.document.body.appendChild(el);
  const model = fakeModel({ turn: null });
  const dispose = turnWidget.render({ model, el });
  assert.deepEqual(model.sent, [{ type: "hello" }]);
  assert.ok(el.classList.contains("mmsp-root"));
  model.custom({ type: "snapshot", turn: { status: "streaming", items: [{ i: 0, kind: "text", status: "streaming", text: "Hel" }] } });
  model.custom({ type: "ops", ops: [["append", 0, "lo"], ["set", 0, { status: "done" }], ["turn", { status: "complete", footer: { usage: { response_tokens: 2 }, finish_reason: "stop" } }]] });
  assert.equal(el.querySelector(".mmsp-text").textContent.trim(), "Hello");
  const p = el.querySelector(".mmsp-text p");
  model.update("turn", { status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "Hello" }], footer: { usage: { response_tokens: 2 }, finish_reason: "stop" } });
  assert.equal(el.querySelector(".mmsp-text p"), p, "the final trait equal to what is shown does not redraw");
  model.update("turn", { status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "Hello, world" }], footer: null });
  assert.equal(el.querySelector(".mmsp-text").textContent.trim(), "Hello, world");
  dispose();
  assert.equal(model.listeners(), 0);
  assert.equal(el.children.length, 0);
});

test("turn widget: draws a saved turn trait on render", () => {
  const jsdom = new JSDOM("<!doctype html><html><body></body></html>");
  const el = jsdom.window.document.createElement("div");
  const model = fakeModel({ turn: { status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "# Saved" }] } });
  turnWidget.render({ model, el });
  assert.equal(el.querySelector("h1").textContent, "Saved");
});

test("chat: keys pressed anywhere in the chat (its conversation, its buttons) never reach the notebook", () => {
  const { win, el, q, key, model } = setup();
  model.update("transcript", [{ role: "user", text: "hi", images: [] }]);
  const reached = [];
  win.document.addEventListener("keydown", (e) => reached.push(e.key));
  for (const target of [q(".mmsp-chat-log"), q(".mmsp-copy"), q(".mmsp-new-chat"), q("textarea.mmsp-input"), q(".mmsp-model-select")]) {
    for (const k of ["d", "m", "a", "Escape"]) key(target, { key: k });
    key(target, { key: "Enter", shiftKey: true });
    assert.equal(target.getAttribute("data-lm-suppress-shortcuts"), "true", target.className);
    // the application's own shortcuts still work
    key(target, { key: "s", ctrlKey: true });
    assert.equal(target.hasAttribute("data-lm-suppress-shortcuts"), false, target.className);
  }
  assert.deepEqual(reached, ["s", "s", "s", "s", "s"]);
  assert.ok(el.querySelector(".mmsp-chat"));
});

test("chat: a new message adds its own node and leaves the conversation's nodes in place", () => {
  const { win, model, q } = setup();
  const done = { status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "an answer" }], footer: null };
  const u1 = { role: "user", text: "one", images: [] };
  model.update("transcript", [u1, { role: "assistant", turn: done }]);
  const log = q(".mmsp-chat-log");
  const before = [...log.querySelectorAll(".mmsp-msg")];
  const seen = new win.MutationObserver(() => {});
  seen.observe(log, { childList: true });
  model.update("transcript", [u1, { role: "assistant", turn: done }, { role: "user", text: "two", images: [] }]);
  model.custom({ type: "ops", turn: 3, ops: [["turn", { status: "streaming" }]] });
  const records = seen.takeRecords();
  const moved = records.flatMap((r) => [...r.removedNodes]);
  assert.deepEqual(moved, [], "no node of the conversation was taken out and put back");
  const added = records.flatMap((r) => [...r.addedNodes]);
  assert.equal(added.length, 2, "the new message and the live turn");
  assert.deepEqual([...log.querySelectorAll(".mmsp-msg")].slice(0, 2), before);
  assert.deepEqual([...log.querySelectorAll(".mmsp-msg-user .mmsp-user-text")].map((e) => e.textContent), ["one", "two"]);
});

test("chat: a long user message is collapsed behind Show more / Show less (aria-expanded)", () => {
  const { model, el } = setup();
  const long = Array.from({ length: 500 }, (_, k) => `line ${k}`).join("\n");
  model.update("transcript", [{ role: "user", text: "short", images: [] }, { role: "user", text: long, images: [] }]);
  const [shortMsg, longMsg] = el.querySelectorAll(".mmsp-msg-user");
  assert.equal(shortMsg.querySelector(".mmsp-more"), null);
  assert.ok(!shortMsg.querySelector(".mmsp-user-text").classList.contains("mmsp-collapsed"));
  const body = longMsg.querySelector(".mmsp-user-text");
  const more = longMsg.querySelector("button.mmsp-more");
  assert.equal(body.textContent, long); // the whole text is there (copy, search), only clipped
  assert.ok(body.classList.contains("mmsp-collapsed"));
  assert.equal(more.getAttribute("aria-expanded"), "false");
  assert.equal(more.getAttribute("aria-controls"), body.id);
  assert.equal(more.textContent, "Show more");
  more.click();
  assert.equal(more.getAttribute("aria-expanded"), "true");
  assert.equal(more.textContent, "Show less");
  assert.ok(!body.classList.contains("mmsp-collapsed"));
  more.click();
  assert.ok(body.classList.contains("mmsp-collapsed"));
  // one long line counts too
  model.update("transcript", [{ role: "user", text: "x".repeat(5000), images: [] }]);
  assert.ok(el.querySelector(".mmsp-user-text").classList.contains("mmsp-collapsed"));
});

/** A chat streaming "Partial" into its reply, on a clock the test moves (`clock.now`) and a watch
 * the test ticks (`tick()`: what the chat's interval would run; null once the watch ends). */
function streamingChat(clock) {
  const chat = setup();
  const watch = { fn: null };
  chat.win.setInterval = (fn) => { watch.fn = fn; return 7; };
  chat.win.clearInterval = () => { watch.fn = null; };
  chat.model.update("transcript", [{ role: "user", text: "tell me", images: [] }]);
  chat.model.update("busy", true);
  const streaming = { kind: "streaming", text: "streaming…" };
  chat.model.custom({ type: "ops", turn: 1, ops: [["turn", { status: "streaming", banner: streaming }], ["item", 0, { kind: "text", status: "streaming" }], ["append", 0, "Partial"]] });
  return { ...chat, watch, clock };
}

/** `body(clock)` with Date.now reading `clock.now` (put back after). */
function onClock(start, body) {
  const realNow = Date.now;
  const clock = { now: start };
  Date.now = () => clock.now;
  try {
    body(clock);
  } finally {
    Date.now = realNow;
  }
}

test("chat: a kernel that stops answering while a reply streams: heartbeats keep the reply, silence cuts it and input comes back", () => {
  onClock(1_000_000, (clock) => {
    // (no window timers here: the test drives the check itself)
    const { model, q, el, win, dispose, watch } = streamingChat(clock);
    const tick = () => watch.fn();
    assert.ok(watch.fn, "watching the kernel while busy");
    assert.equal(q(".mmsp-send").textContent, "Stop");
    // no ops for 15 s, but a heartbeat every 2 s: the kernel is alive, the reply goes on (and the
    // front end asks nothing: a kernel busy with a cell would not read it)
    const sent = model.sent.length;
    for (let k = 0; k < 30; k++) {
      clock.now += 500;
      if (k % 4 === 3) model.custom({ type: "heartbeat" });
      tick();
    }
    assert.equal(q(".mmsp-send").textContent, "Stop");
    assert.equal(el.querySelector(".mmsp-msg-assistant .mmsp-turn").getAttribute("data-status"), "streaming");
    assert.equal(model.sent.length, sent);
    // silent for 10 s (the last heartbeat was 1 s ago): the reply is cut, marked, and the chat
    // takes input again
    for (let k = 0; k < 17; k++) {
      clock.now += 500;
      tick();
    }
    assert.equal(q(".mmsp-send").textContent, "Stop", "not cut before 10 s of silence");
    clock.now += 500;
    tick();
    assert.equal(watch.fn, null, "the watch ends with the busy state");
    assert.equal(q(".mmsp-send").textContent, "Send");
    const turn = el.querySelector(".mmsp-msg-assistant .mmsp-turn");
    assert.equal(turn.getAttribute("data-status"), "incomplete");
    assert.match(turn.querySelector(".mmsp-status").textContent, /kernel stopped answering; the reply was cut/);
    assert.equal(turn.querySelector(".mmsp-text").textContent.trim(), "Partial");
    assert.match(q(".mmsp-composer-note").textContent, /kernel stopped answering/);
    const input = q("textarea.mmsp-input");
    input.value = "again";
    input.dispatchEvent(new win.KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
    assert.deepEqual(sendOf(model.sent.at(-1)), { type: "send", text: "again", images: [] });
    dispose();
  });
});

test("chat: a reply cut for silence that then goes on streaming is drawn as streaming again, not as cut", () => {
  onClock(2_000_000, (clock) => {
    const { model, q, el, dispose, watch } = streamingChat(clock);
    for (let k = 0; k < 21; k++) {
      clock.now += 500;
      if (watch.fn) watch.fn();
    }
    const msg = el.querySelector(".mmsp-msg-assistant");
    const turn = msg.querySelector(".mmsp-turn");
    assert.equal(turn.getAttribute("data-status"), "incomplete", "cut after 10 s of silence");
    // the kernel was only slow: its next ops continue the reply (the kernel never sends status or
    // banner again: they did not change on its side)
    model.custom({ type: "ops", turn: 1, ops: [["append", 0, " and more"]] });
    assert.equal(turn.getAttribute("data-status"), "streaming");
    assert.ok(turn.querySelector(".mmsp-streaming"), "the streaming indicator is back");
    assert.doesNotMatch(turn.querySelector(".mmsp-status").textContent, /reply was cut/);
    assert.equal(msg.classList.contains("mmsp-cut-off"), false);
    assert.equal(q(".mmsp-send").textContent, "Stop");
    assert.equal(q(".mmsp-retry").hidden, true);
    assert.equal(q(".mmsp-composer-note").hidden, true);
    dispose();
  });
});

/** A chat whose window timers the test fires itself (`timers.fire()`: the ones due, in order). */
function timedChat() {
  const chat = setup();
  const timers = { list: [], fire() { const due = this.list.splice(0); for (const t of due) if (!t.cleared) t.fn(); } };
  chat.win.setTimeout = (fn) => { const t = { fn, cleared: false }; timers.list.push(t); return t; };
  chat.win.clearTimeout = (t) => { if (t) t.cleared = true; };
  return { ...chat, timers };
}

test("chat: a message the kernel never answers (it restarted) comes back into the box, and the note says why", () => {
  const { model, q, win, timers, dispose } = timedChat();
  const input = q("textarea.mmsp-input");
  const enter = () => input.dispatchEvent(new win.KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
  input.value = "are you there?";
  enter();
  assert.deepEqual(sendOf(model.sent.at(-1)), { type: "send", text: "are you there?", images: [] });
  assert.equal(input.value, "");
  timers.fire(); // nothing from the kernel in time: a restarted kernel drops a message to a chat it lacks
  assert.equal(input.value, "are you there?", "the message is not lost");
  const note = q(".mmsp-composer-note");
  assert.equal(note.hidden, false);
  assert.match(note.textContent, /kernel has not answered yet.*run this chat's cell again/);
  dispose();
});

test("chat: a message the kernel refuses comes back into the box, its images too, whatever the kernel said before", async () => {
  // (it only set the error, and the error, as any word from the kernel, counted as an answer: the
  // box stayed empty, the message and its images were gone)
  const { win, model, q, el, key, dispose } = setup();
  const input = q("textarea.mmsp-input");
  const note = q(".mmsp-composer-note");
  const file = new win.File([Uint8Array.from(Buffer.from(PNG.split(",")[1], "base64"))], "shot.png", { type: "image/png" });
  const e = new win.Event("paste", { bubbles: true, cancelable: true });
  Object.defineProperty(e, "clipboardData", { value: { items: [{ kind: "file", type: "image/png", getAsFile: () => file }], types: ["Files"], files: [file] } });
  input.dispatchEvent(e);
  await until(() => el.querySelectorAll(".mmsp-attachment").length === 1);
  input.value = "a long carefully written question";
  key(input, { key: "Enter" });
  const sent = model.sent.at(-1);
  assert.equal(input.value, "");
  assert.equal(el.querySelectorAll(".mmsp-attachment").length, 0);
  // another view's message was taken first (its transcript entry and its reply's heartbeat come
  // here too), then this one is refused: the error, and the refusal naming this send
  model.custom({ type: "transcript", at: 0, entries: [{ role: "user", text: "another view's", images: [] }] });
  model.update("busy", true);
  model.custom({ type: "heartbeat" });
  const error = "BusyError: a turn is already streaming in this chat: stop it or wait for it";
  model.update("error", error);
  model.custom({ type: "refused", id: "another-view-1", error }); // (not this view's: nothing happens)
  assert.equal(input.value, "");
  model.custom({ type: "refused", id: sent.id, error });
  assert.equal(input.value, "a long carefully written question", "the message is not lost");
  assert.deepEqual([...el.querySelectorAll(".mmsp-attachment img")].map((i) => i.getAttribute("src")), sent.images);
  assert.equal(note.hidden, false);
  assert.equal(note.textContent, "Not sent (the error above says why). Your message is back in the box.");
  assert.equal(q(".mmsp-chat-error").hidden, false);
  model.custom({ type: "refused", id: sent.id, error }); // (once)
  assert.equal(input.value, "a long carefully written question");
  assert.equal(el.querySelectorAll(".mmsp-attachment").length, 1);
  // the reply ends; sent again, refused again (a text the kernel cannot take) while the user writes
  // the next one: both are kept, the refused one first; the banner dismissed, the note says why
  model.update("busy", false);
  q(".mmsp-dismiss").click();
  key(input, { key: "Enter" });
  const again = model.sent.at(-1);
  assert.notEqual(again.id, sent.id);
  input.value = "and a second thought";
  model.custom({ type: "refused", id: again.id, error });
  assert.equal(input.value, "a long carefully written question\n\nand a second thought");
  assert.equal(el.querySelectorAll(".mmsp-attachment").length, 1);
  assert.equal(note.textContent, `Not sent: ${error}. Your message is back in the box, before what you wrote since.`);
  dispose();
});

test("chat: a message put back for want of an answer, then refused, is not put back twice", () => {
  const { model, q, win, timers, dispose } = timedChat();
  const input = q("textarea.mmsp-input");
  input.value = "are you there?";
  input.dispatchEvent(new win.KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
  const sent = model.sent.at(-1);
  timers.fire(); // no answer in time: back in the box
  input.value = "are you there? (edited)";
  model.custom({ type: "refused", id: sent.id, error: "OptionError: the prompt holds a lone surrogate" });
  assert.equal(input.value, "are you there? (edited)");
  assert.equal(q(".mmsp-composer-note").textContent, "Not sent: OptionError: the prompt holds a lone surrogate. Your message is in the box.");
  dispose();
});

test("chat: a message answered late (a cell kept the kernel busy) leaves the box again; one answered in time never comes back", () => {
  const { model, q, win, timers, dispose } = timedChat();
  const input = q("textarea.mmsp-input");
  const enter = () => input.dispatchEvent(new win.KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
  input.value = "first";
  enter();
  // the kernel takes the message: the user's entry comes back in the transcript
  model.custom({ type: "transcript", at: 0, entries: [{ role: "user", text: "first", images: [] }] });
  timers.fire();
  assert.equal(input.value, "", "answered in time: nothing comes back");
  assert.equal(q(".mmsp-composer-note").hidden, true);
  model.update("busy", false);
  input.value = "second";
  enter();
  timers.fire();
  assert.equal(input.value, "second");
  // the kernel was only busy: it takes the message now, and the box is emptied again
  model.custom({ type: "transcript", at: 1, entries: [{ role: "user", text: "second", images: [] }] });
  assert.equal(input.value, "");
  assert.equal(q(".mmsp-composer-note").hidden, true);
  // what the user wrote meanwhile stays
  input.value = "third";
  enter();
  timers.fire();
  input.value = "third, edited";
  model.update("busy", true);
  assert.equal(input.value, "third, edited");
  dispose();
});

test("chat: Retry and Dismiss, which go away once used, leave the focus in the message box", () => {
  const { model, q, el, win } = setup();
  const doc = win.document;
  const user = { role: "user", text: "q", images: [] };
  const failed = { role: "assistant", turn: { status: "error", items: [], banner: { kind: "error", text: "boom" }, footer: null } };
  model.update("transcript", [user, failed]);
  const retry = q("button.mmsp-retry");
  assert.equal(retry.hidden, false);
  retry.focus();
  retry.click();
  assert.deepEqual(model.sent.at(-1), { type: "retry" });
  // the kernel drops the failed turn and its message, then sends the message again
  model.update("busy", true);
  model.custom({ type: "transcript", at: 0, entries: [] });
  model.custom({ type: "transcript", at: 0, entries: [user] });
  assert.equal(retry.isConnected, false);
  assert.equal(doc.activeElement, q("textarea.mmsp-input"), "focus is not lost to the page (where keys reach the notebook)");
  model.update("busy", false);
  model.update("error", "could not send");
  const dismiss = q("button.mmsp-dismiss");
  assert.equal(q(".mmsp-chat-error").hidden, false);
  dismiss.focus();
  dismiss.click();
  assert.equal(q(".mmsp-chat-error").hidden, true);
  assert.equal(doc.activeElement, q("textarea.mmsp-input"));
  assert.ok(el.contains(doc.activeElement));
});

test("chat: a message that goes (a retry, a new chat) is no longer watched for its size", () => {
  const jsdom = new JSDOM("<!doctype html><html><body></body></html>");
  const win = jsdom.window;
  const watched = new Set();
  win.ResizeObserver = class {
    observe(t) { watched.add(t); }
    unobserve(t) { watched.delete(t); }
    disconnect() { watched.clear(); }
  };
  const el = win.document.createElement("div");
  win.document.body.appendChild(el);
  const model = fakeModel({ transcript: [], busy: false, models: [], model: "", thinking: "", thinking_levels: [], error: "" });
  const forget = chatWidget.initialize({ model });
  const dispose = chatWidget.render({ model, el });
  const answer = (text) => ({ role: "assistant", turn: { status: "complete", items: [{ i: 0, kind: "text", status: "done", text }], footer: null } });
  const detached = () => [...watched].filter((t) => t !== el.querySelector(".mmsp-chat-log") && !t.isConnected).length;
  for (let k = 0; k < 5; k++) {
    model.custom({ type: "transcript", at: 0, entries: [{ role: "user", text: `q${k}`, images: [] }, answer(`a${k}`)] });
    model.custom({ type: "ops", turn: 3, ops: [["item", 0, { kind: "text", status: "streaming" }]] }); // a live turn
    model.custom({ type: "transcript", at: 0, entries: [] }); // a new chat
  }
  assert.equal(detached(), 0, "no message gone from the page is kept by the observer");
  dispose();
  forget();
  assert.equal(watched.size, 0);
});

test("chat: the transcript's changes arrive as messages; the model keeps the whole conversation, unsaved", () => {
  const { model, el, q } = setup();
  const u = (text) => ({ role: "user", text, images: [] });
  const a = (text) => ({ role: "assistant", turn: { status: "complete", items: [{ i: 0, kind: "text", status: "done", text }], footer: null } });
  const said = () => [...el.querySelectorAll(".mmsp-msg")].map((m) => m.querySelector(".mmsp-user-text, .mmsp-text").textContent.trim());
  model.custom({ type: "transcript", at: 0, entries: [u("one")] });
  model.custom({ type: "transcript", at: 1, entries: [a("first answer")] });
  model.custom({ type: "transcript", at: 2, entries: [u("two")] });
  model.custom({ type: "transcript", at: 3, entries: [a("second answer")] });
  assert.deepEqual(model.get("transcript"), [u("one"), a("first answer"), u("two"), a("second answer")]);
  assert.deepEqual(said(), ["one", "first answer", "two", "second answer"]);
  assert.equal(model.saved, 0, "kept in the model's state (saved with the notebook), never sent back");
  // a retry drops the last answer; a new chat empties it
  model.custom({ type: "transcript", at: 3, entries: [] });
  assert.equal(model.get("transcript").length, 3);
  assert.equal(el.querySelectorAll(".mmsp-msg-assistant").length, 1);
  // a second view of the same model draws the whole conversation from the model's state
  const other = el.ownerDocument.createElement("div");
  const disposeOther = chatWidget.render({ model, el: other });
  assert.equal(other.querySelectorAll(".mmsp-msg").length, 3);
  disposeOther();
  model.custom({ type: "transcript", at: 0, entries: [] });
  assert.deepEqual(model.get("transcript"), []);
  assert.equal(el.querySelectorAll(".mmsp-msg").length, 0);
  assert.equal(q(".mmsp-chat-empty").hidden, false);
});

test("chat: a change whose start never arrived asks for the conversation whole, and the snapshot sets it", () => {
  const model = fakeModel({ transcript: [] });
  const forget = keepTranscript(model);
  model.custom({ type: "transcript", at: 2, entries: [{ role: "assistant", turn: { status: "complete", items: [] } }] });
  assert.deepEqual(model.get("transcript"), [], "not applied over a gap");
  assert.deepEqual(model.sent, [{ type: "hello" }]);
  const whole = [{ role: "user", text: "a", images: [] }, { role: "user", text: "b", images: [] }];
  model.custom({ type: "chat_snapshot", chat: { transcript: whole, live: null } });
  assert.deepEqual(model.get("transcript"), whole);
  for (const bad of [{ type: "transcript", at: -1, entries: [] }, { type: "transcript", at: 0 }, { type: "transcript", at: "0", entries: [] }]) {
    model.custom(bad);
    assert.deepEqual(model.get("transcript"), whole, JSON.stringify(bad));
  }
  forget();
  assert.equal(model.listeners(), 0);
  assert.equal(model.saved, 0);
});

test("chat: a transcript change compares the entries it keeps by identity, not by serializing them", () => {
  const { model, q } = setup();
  const done = { status: "complete", items: [{ i: 0, kind: "text", status: "done", text: "an answer" }], footer: null };
  const u1 = { role: "user", text: "one", images: [] };
  const a1 = { role: "assistant", turn: done };
  model.update("transcript", [u1, a1]);
  const u2 = { role: "user", text: "two", images: [] };
  const real = JSON.stringify;
  const serialized = [];
  JSON.stringify = (value, ...rest) => {
    serialized.push(value);
    return real(value, ...rest);
  };
  try {
    model.update("transcript", [u1, a1, u2]);
  } finally {
    JSON.stringify = real;
  }
  assert.ok(serialized.includes(u2), "the new entry is keyed");
  assert.ok(!serialized.includes(u1) && !serialized.includes(a1), "the kept ones are not serialized again");
  // an equal entry that is another object (the state sent whole again) keeps its node
  const node = q(".mmsp-msg-user");
  model.update("transcript", [{ ...u1 }, a1, u2]);
  assert.equal(q(".mmsp-msg-user"), node);
});

test("chat: with its kernel gone, Stop, Retry, New chat and the pickers say so instead of throwing", () => {
  const { model, q, win, key } = setup();
  model.update("transcript", [{ role: "user", text: "q", images: [] },
    { role: "assistant", turn: { status: "error", items: [], banner: { kind: "error", text: "failed" } } }]);
  model.send = () => {
    throw new Error("Cannot send: the comm is closed");
  };
  const note = q(".mmsp-composer-note");
  const gone = () => !note.hidden && /no longer connected to a kernel: run its cell again/.test(note.textContent);
  q("button.mmsp-retry").click();
  assert.ok(gone(), "Retry");
  note.hidden = true;
  q("button.mmsp-new-chat").click();
  assert.ok(gone(), "New chat");
  note.hidden = true;
  model.update("busy", true);
  q("button.mmsp-send").click();
  assert.ok(gone(), "Stop");
  note.hidden = true;
  key(q("textarea.mmsp-input"), { key: "Escape" });
  assert.ok(gone(), "Esc");
  note.hidden = true;
  const sel = q(".mmsp-model-select");
  sel.value = "demo-fast";
  sel.dispatchEvent(new win.Event("change", { bubbles: true }));
  assert.ok(gone(), "a picker");
});

test("chat: focus leaving a message for another element takes its controls out of the Tab order at once", () => {
  const { model, q, el, win, dispose } = setup();
  const turn = { status: "complete", items: [{ kind: "text", status: "done", text: "an answer with [a link](https://example.com)" }] };
  model.update("transcript", [{ role: "user", text: "hi", images: [] }, { role: "assistant", turn }]);
  const msg = el.querySelector(".mmsp-msg-assistant");
  const copy = msg.querySelector(".mmsp-copy");
  assert.ok(copy, "the answer has a Copy button");
  msg.focus();
  msg.dispatchEvent(new win.FocusEvent("focusin", { bubbles: true }));
  assert.equal(copy.getAttribute("tabindex"), "0", "focus in the message: its controls are reachable");
  // focus goes to the input: no timer between that and the next key (a browser handles keys first)
  const input = q(".mmsp-input");
  msg.dispatchEvent(new win.FocusEvent("focusout", { bubbles: true, relatedTarget: input }));
  input.focus();
  assert.equal(copy.getAttribute("tabindex"), "-1");
  dispose();
});
