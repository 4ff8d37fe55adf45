// anywidget front end of Chat: a conversation with streamed assistant turns (drawn by render.js).
//
// Traits read: transcript, busy, models, model, thinking, thinking_levels, error.
// Messages sent: hello, send (with an id), pick (the model and thinking pickers), stop, new_chat,
// retry, math_code (math.js). Received: transcript, ops (with turn index), chat_snapshot, heartbeat,
// refused (a message sent that the kernel did not take, by its id), math_code (the math renderer,
// in a binary buffer).
//
// The transcript: once a view has said hello, the kernel sends it whole only in the state of a
// model that opens and in a snapshot; each change comes as {type: "transcript", at, entries} (the
// first `at` entries stay, `entries` follow), so a turn costs the same bytes at the start and the
// end of a long chat (before any hello, the trait changes as state: a message sent before this code
// has loaded would be lost). keepTranscript (the widget's initialize, once per model) sets the
// result with model.set and no save_changes: the views draw it from change:transcript, and the
// notebook's saved widget state holds the whole conversation. Nothing here calls save_changes (the
// pickers send pick), so the transcript never goes back to the kernel.
//
// Liveness: while a reply streams, the kernel sends something at least every 2 s: its ops, or a
// heartbeat ({type: "heartbeat"}) when the reply has nothing new to show (a silent model, a tool at
// work). Both come from the worker thread that streams the reply, so they keep coming while the
// kernel's shell thread runs a long cell (and would not read a message from here). Any message
// counts as a sign of life; none for DEAD_MS (a restart, a crash) and the reply is cut here.
import { createTurnView } from "./render.js";
import { h, button, isSafeImageSrc, copyText, flashCopied, covers, keysStayIn, rovingTabStop, sender } from "./util.js";
import { connectMath } from "./math.js";

const RETRYABLE = new Set(["error", "incomplete", "cancelled"]);
const FAILED = new Set(["error", "incomplete"]);
const MAX_IMAGE_BYTES = 20 * 1024 * 1024;
// A user message longer than this is shown collapsed, with "Show more" (views/html.py: the same limits)
const LONG_LINES = 12;
const LONG_CHARS = 1200;
let collapsedIds = 0;
const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp)$/;
// Enter while a reply streams keeps the message in the box, and says so (until the reply ends)
const WAIT_NOTE = "A reply is streaming: your message stays here. Enter sends it once the reply is done; Esc or Stop ends the reply.";
// Silent for DEAD_MS while a reply streams (no ops, no heartbeat: the kernel restarted or died), the
// reply is cut here: the chat leaves its busy state instead of refusing input forever.
const DEAD_MS = 10000;
const DEAD_NOTE = "The kernel stopped answering; the reply was cut.";
const NO_KERNEL = "This chat is no longer connected to a kernel: run its cell again to chat.";
// A message sent that the kernel has not answered in ACK_MS comes back into the box, and the note
// says why: a kernel restarted from elsewhere (another tab, the server) drops a message to a chat it
// does not have without a word, and one running a cell reads it only when the cell ends. If the
// kernel answers later (it was busy), the box is emptied again.
const ACK_MS = 4000;
const NO_ANSWER = "The kernel has not answered yet: if a cell is running, your message goes when it ends; if the kernel restarted, run this chat's cell again (your message is kept in the box).";
// Each message sent carries an id the kernel names when it refuses it ({type: "refused", id, error}):
// the view that sent it puts it back in its box (see refused()).
let views = 0;

function optionList(list, emptyLabel) {
  if (!Array.isArray(list)) return [];
  return list
    .map((m) => {
      if (typeof m === "string") return { value: m, label: m || emptyLabel || "default" };
      if (Array.isArray(m) && m.length >= 2) return { value: String(m[1]), label: String(m[0]) };
      if (m && typeof m === "object") {
        const value = m.value ?? m.id ?? m.name;
        if (value === undefined || value === null) return null;
        return { value: String(value), label: String(m.label ?? m.name ?? value) };
      }
      return null;
    })
    .filter(Boolean);
}

export function renderChatWidget({ model, el }) {
  const doc = el.ownerDocument;
  const win = doc.defaultView;
  el.classList.add("mmsp-root", "mmsp-chat-widget");
  const cleanups = [];
  const listen = (target, type, fn, opts) => {
    target.addEventListener(type, fn, opts);
    cleanups.push(() => target.removeEventListener(type, fn, opts));
  };
  const on = (name, fn) => {
    model.on(name, fn);
    cleanups.push(() => {
      if (typeof model.off === "function") model.off(name, fn);
    });
  };
  const copy = (text) => copyText(text, doc);
  cleanups.push(connectMath(model)); // the kernel serves the math renderer, loaded on first use

  // ------------------------------------------------------------------ layout
  const root = h(doc, "div", "mmsp-chat");
  const toolbar = h(doc, "div", "mmsp-chat-toolbar");
  const modelLabel = h(doc, "label", "mmsp-field");
  modelLabel.appendChild(h(doc, "span", "mmsp-field-label", null, "Model"));
  const modelSel = h(doc, "select", "mmsp-select mmsp-model-select", { "aria-label": "Model" });
  modelLabel.appendChild(modelSel);
  const thinkLabel = h(doc, "label", "mmsp-field");
  thinkLabel.appendChild(h(doc, "span", "mmsp-field-label", null, "Thinking"));
  const thinkSel = h(doc, "select", "mmsp-select mmsp-thinking-select", { "aria-label": "Thinking level" });
  thinkLabel.appendChild(thinkSel);
  const spacer = h(doc, "span", "mmsp-spacer");
  const newBtn = button(doc, "mmsp-btn mmsp-new-chat", "New chat", "Start a new chat");
  toolbar.append(modelLabel, thinkLabel, spacer, newBtn);

  const errorBanner = h(doc, "div", "mmsp-banner mmsp-error mmsp-chat-error", { role: "alert" });
  const errorText = h(doc, "span", "mmsp-chat-error-text");
  const errorClose = button(doc, "mmsp-btn mmsp-btn-icon mmsp-dismiss", "×", "Dismiss error");
  errorBanner.append(errorText, errorClose);
  errorBanner.hidden = true;

  const body = h(doc, "div", "mmsp-chat-body");
  // One Tab stop for the whole conversation: its current message (arrows move between messages,
  // Home/End to the first/last); a message's own controls (Copy, Retry, code blocks, links) take
  // Tab only while focus is in that message.
  const log = h(doc, "div", "mmsp-chat-log", { tabindex: "-1", role: "feed", "aria-label": "Conversation" });
  const empty = h(doc, "div", "mmsp-chat-empty mmsp-meta", null, "Ask something. Enter sends, Shift+Enter adds a new line; paste or drop images to attach them.");
  log.appendChild(empty);
  const jump = button(doc, "mmsp-btn mmsp-jump", "↓ Latest", "Jump to the latest message");
  jump.hidden = true;
  body.append(log, jump);

  const composer = h(doc, "div", "mmsp-composer");
  const attachments = h(doc, "div", "mmsp-attachments", { "aria-label": "Attached images" });
  attachments.hidden = true;
  const note = h(doc, "div", "mmsp-composer-note mmsp-meta", { "aria-live": "polite" });
  note.hidden = true;
  const row = h(doc, "div", "mmsp-composer-row");
  const input = h(doc, "textarea", "mmsp-input", {
    rows: "2",
    "aria-label": "Message",
    placeholder: "Message — Enter to send, Shift+Enter for a new line",
  });
  const fileInput = h(doc, "input", "mmsp-file", { type: "file", accept: "image/png,image/jpeg,image/gif,image/webp", multiple: true, tabindex: "-1", "aria-hidden": "true" });
  fileInput.hidden = true;
  const attachBtn = button(doc, "mmsp-btn mmsp-attach", "Image", "Attach an image", "Attach an image (or paste / drop one)");
  const sendBtn = button(doc, "mmsp-btn mmsp-primary mmsp-send", "Send", "Send message");
  row.append(input, attachBtn, sendBtn, fileInput);
  composer.append(attachments, note, row);

  root.append(toolbar, errorBanner, body, composer);
  el.appendChild(root);

  // ------------------------------------------------------------------ state
  let entries = []; // {key, role, el, view?, text?}
  let live = null; // {index, el, view, retry}
  let stick = true;
  let pending = []; // attached images: {src}
  let errorDismissed = null;

  let heard = Date.now(); // the last time the kernel said anything
  let gone = false; // it stopped answering while busy: the reply is cut here
  const busy = () => !!model.get("busy") && !gone;

  // ------------------------------------------------------------------ scrolling
  // The log follows the bottom while the reader has not scrolled up: after every change of its
  // content's size (text drawn, an image decoded, a footer added), not only when ops arrive.
  // Scrolled up, it stays put and "Latest" brings them back down.
  let lastTop = 0;
  const atBottom = () => log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  listen(log, "scroll", () => {
    const up = log.scrollTop < lastTop - 1;
    lastTop = log.scrollTop;
    if (atBottom()) stick = true;
    else if (up) stick = false; // the reader scrolled up (content growing below never unsticks)
    jump.hidden = stick;
  });
  listen(log, "wheel", (e) => {
    if (e.deltaY < 0 && log.scrollHeight > log.clientHeight + 1) {
      stick = false;
      jump.hidden = false;
    }
  }, { passive: true });
  function scrollToEnd() {
    if (stick) {
      log.scrollTop = log.scrollHeight;
      lastTop = log.scrollTop;
    } else if (!atBottom()) jump.hidden = false;
  }
  listen(jump, "click", () => {
    stick = true;
    jump.hidden = true;
    scrollToEnd();
    log.focus({ preventScroll: true });
  });
  // images decode after they are added: their height arrives later than the ops that drew them
  listen(log, "load", () => scrollToEnd(), true);
  let resizeObserver = null;
  if (typeof win.ResizeObserver === "function") {
    resizeObserver = new win.ResizeObserver(() => scrollToEnd());
    resizeObserver.observe(log);
    cleanups.push(() => resizeObserver.disconnect());
  }
  const observeSize = (el) => {
    if (resizeObserver) resizeObserver.observe(el);
  };

  // ------------------------------------------------------------------ messages
  function actionsBar() {
    return h(doc, "div", "mmsp-msg-actions");
  }

  function copyButton(getText, what) {
    const b = button(doc, "mmsp-btn mmsp-btn-small mmsp-copy", "Copy", `Copy ${what}`);
    b.addEventListener("click", () => {
      Promise.resolve(copy(getText())).then(
        (ok) => flashCopied(b, ok !== false),
        () => flashCopied(b, false),
      );
    });
    return b;
  }

  function userMessage(entry) {
    const m = h(doc, "div", "mmsp-msg mmsp-msg-user", { role: "article", "aria-label": "Your message", tabindex: "-1" });
    const bubble = h(doc, "div", "mmsp-bubble");
    const text = typeof entry.text === "string" ? entry.text : "";
    if (text) {
      const body = h(doc, "div", "mmsp-user-text", null, text);
      bubble.appendChild(body);
      if (text.length > LONG_CHARS || text.split("\n", LONG_LINES + 1).length > LONG_LINES) {
        // a long message (a pasted file) is shown collapsed: it would push the conversation away
        body.id = `mmsp-user-text-${++collapsedIds}`;
        body.classList.add("mmsp-collapsed");
        const more = h(doc, "button", "mmsp-btn mmsp-btn-small mmsp-more", { type: "button", "aria-expanded": "false", "aria-controls": body.id }, "Show more");
        more.addEventListener("click", () => {
          const open = more.getAttribute("aria-expanded") !== "true";
          more.setAttribute("aria-expanded", String(open));
          more.textContent = open ? "Show less" : "Show more";
          body.classList.toggle("mmsp-collapsed", !open);
          if (!open && typeof m.scrollIntoView === "function") m.scrollIntoView({ block: "nearest" });
        });
        bubble.appendChild(more);
      }
    }
    const imgs = Array.isArray(entry.images) ? entry.images : [];
    if (imgs.length) {
      const thumbs = h(doc, "div", "mmsp-thumbs");
      imgs.forEach((src, k) => {
        if (isSafeImageSrc(src)) thumbs.appendChild(h(doc, "img", "mmsp-thumb", { src, alt: `attached image ${k + 1}` }));
        else thumbs.appendChild(h(doc, "span", "mmsp-meta", null, `image ${k + 1} not shown`));
      });
      bubble.appendChild(thumbs);
    }
    const actions = actionsBar();
    actions.appendChild(copyButton(() => text, "message"));
    m.append(bubble, actions);
    return { role: "user", el: m, text };
  }

  function assistantMessage(vm) {
    const m = h(doc, "div", "mmsp-msg mmsp-msg-assistant", { role: "article", "aria-label": "Answer", tabindex: "-1" });
    const body = h(doc, "div", "mmsp-msg-body");
    const view = createTurnView(body, { onCopy: copy });
    if (vm) view.render(vm);
    observeSize(body);
    const actions = actionsBar();
    actions.appendChild(copyButton(() => view.getText(), "answer"));
    const retry = button(doc, "mmsp-btn mmsp-btn-small mmsp-retry", "Retry", "Retry this answer");
    retry.hidden = true;
    retry.addEventListener("click", () => {
      if (busy()) return;
      tell({ type: "retry" });
      // the button goes (hidden while the reply streams, then its turn is dropped): the focus goes
      // to the message box, not to the page, where the next keys would reach the notebook
      input.focus();
    });
    actions.appendChild(retry);
    m.append(body, actions);
    return { role: "assistant", el: m, view, retry, body };
  }

  // ------------------------------------------------------------------ keyboard: one Tab stop for the conversation
  const FOCUSABLE = "button, a[href], summary, audio, textarea, select, input, [tabindex]:not(.mmsp-msg)";
  function messages() {
    return Array.from(log.children).filter((c) => c.classList.contains("mmsp-msg"));
  }
  /** Take a message's controls out of the Tab order, unless focus is in it (``open``: whether it is,
   *  when the caller knows better than ``document.activeElement`` does during a focus change). */
  function tame(m, open = m.contains(doc.activeElement)) {
    for (const c of m.querySelectorAll(FOCUSABLE)) tameOne(c, open);
  }
  function tameOne(c, open) {
    const want = open ? "0" : "-1";
    if (c.getAttribute("tabindex") !== want) c.setAttribute("tabindex", want);
  }
  // the stop: the message last focused, else the latest; arrows move it only from a message itself
  const rove = rovingTabStop(log, listen, {
    items: messages,
    itemOf: (t) => {
      const m = t.closest ? t.closest(".mmsp-msg") : null;
      return m && log.contains(m) ? m : null;
    },
    keyItem: (t) => (t.classList && t.classList.contains("mmsp-msg") ? t : null),
    fallback: (all) => all[all.length - 1] || null,
    onRove: (all) => {
      for (const m of all) tame(m);
    },
    onRefocus: tame,
  });
  // controls drawn into a message later (its turn view draws on the next frame, math once loaded)
  // leave the Tab order as they come, unless focus is in that message
  if (typeof win.MutationObserver === "function") {
    // (the controls of the nodes added only: a message holding a table of thousands of rows is
    // not searched whole on every frame)
    const tamer = new win.MutationObserver((records) => {
      const added = new Map(); // message -> elements added to it
      for (const r of records) {
        const m = r.target.closest ? r.target.closest(".mmsp-msg") : null;
        if (!m || !log.contains(m)) continue;
        if (!added.has(m)) added.set(m, []);
        for (const n of r.addedNodes) if (n.nodeType === 1) added.get(m).push(n);
      }
      for (const [m, nodes] of added) {
        const open = m.contains(doc.activeElement);
        for (const n of nodes) {
          if (!n.isConnected) continue;
          if (n.matches(FOCUSABLE)) tameOne(n, open);
          for (const c of n.querySelectorAll(FOCUSABLE)) tameOne(c, open);
        }
      }
    });
    tamer.observe(log, { childList: true, subtree: true });
    cleanups.push(() => tamer.disconnect());
  }
  listen(log, "focusout", (e) => {
    const m = e.target.closest ? e.target.closest(".mmsp-msg") : null;
    if (!m || (e.relatedTarget && m.contains(e.relatedTarget))) return;
    // focus went elsewhere: out of the Tab order now (a timer would run after the next key, which
    // the browser handles first); to no element (the window lost focus): once the change is done
    if (e.relatedTarget) tame(m, false);
    else win.setTimeout(() => tame(m), 0);
  });

  function makeEntry(entry) {
    if (entry && entry.role === "user") return userMessage(entry);
    if (entry && entry.role === "assistant") return assistantMessage(entry.turn || {});
    const m = h(doc, "div", "mmsp-msg mmsp-msg-other mmsp-meta", null, entry && entry.text ? String(entry.text) : "");
    return { role: String((entry && entry.role) || ""), el: m };
  }

  function dropEntry(e) {
    if (e.view) e.view.destroy();
    if (e.body && resizeObserver) resizeObserver.unobserve(e.body); // (else kept for the widget's life)
    e.el.remove();
  }

  function drawTranscript(t) {
    const list = Array.isArray(t) ? t : [];
    const next = [];
    for (let k = 0; k < list.length; k++) {
      const entry = list[k];
      const old = entries[k];
      // the same object is the same entry (a change keeps those before it): not serialized again
      const key = old && old.entry === entry ? old.key : JSON.stringify(entry);
      if (old && old.key === key) {
        old.entry = entry;
        next.push(old);
        continue;
      }
      if (live && live.index === k && entry && entry.role === "assistant") {
        // The live turn has ended and joined the transcript: keep its view when it already shows it.
        if (!covers(live.view.viewModel(), entry.turn || {})) live.view.render(entry.turn || {});
        if (old) dropEntry(old);
        next.push({ ...live, key, entry });
        live = null;
        continue;
      }
      if (old) dropEntry(old);
      next.push({ ...makeEntry(entry), key, entry });
    }
    for (let k = list.length; k < entries.length; k++) dropEntry(entries[k]);
    entries = next;
    if (live && live.index < entries.length) {
      dropEntry(live);
      live = null;
    }
    // DOM order: the empty note, the entries, then the live turn. Only a node out of place moves:
    // moving one lays out everything after it again (the whole conversation, on every message).
    let prev = empty;
    for (const e of live ? [...entries, live] : entries) {
      if (prev.nextSibling !== e.el) log.insertBefore(e.el, prev.nextSibling);
      prev = e.el;
    }
    empty.hidden = entries.length > 0 || !!live;
    rove();
    updateRetry();
    scrollToEnd();
  }

  function liveAt(index) {
    if (live && live.index === index) return live;
    if (live) dropEntry(live);
    live = { ...assistantMessage({ status: "streaming", items: [] }), index };
    log.appendChild(live.el);
    empty.hidden = true;
    rove();
    return live;
  }

  function applyOps(index, ops) {
    let target = null;
    if (typeof index === "number" && index < entries.length) {
      const e = entries[index];
      if (e && e.view) target = e;
    }
    if (!target) target = liveAt(typeof index === "number" ? index : entries.length);
    target.view.apply(ops);
    updateRetry();
  }

  function updateRetry() {
    const all = live ? [...entries, live] : entries;
    let last = null;
    for (let k = all.length - 1; k >= 0; k--) {
      if (all[k].view) {
        last = all[k];
        break;
      }
    }
    for (const e of all) {
      if (!e.retry) continue;
      e.retry.hidden = !(e === last && RETRYABLE.has(e.view.status) && !busy());
    }
    drawError();
  }

  // ------------------------------------------------------------------ code blocks: insert into a new cell
  // In JupyterLab and Notebook 7 the chat's output sits in a notebook cell: the code goes into a
  // new cell below it, through the notebook's own UI (the chat's cell made active, the toolbar's
  // "insert a cell below", the new cell's editor given the code as a paste). Anywhere else (or if
  // the notebook does not answer as expected) the code is copied, and the note says so.
  const sleep = (ms) => new Promise((r) => win.setTimeout(r, ms));
  async function waitFor(get, ms = 2000) {
    const end = Date.now() + ms;
    for (;;) {
      const v = get();
      if (v || Date.now() > end) return v;
      await sleep(25);
    }
  }
  function pasteInto(editor, code) {
    editor.focus();
    const dt = new win.DataTransfer();
    dt.setData("text/plain", code);
    editor.dispatchEvent(new win.ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
  }
  async function insertIntoNewCell(code) {
    const cell = el.closest(".jp-Cell");
    const panel = el.closest(".jp-NotebookPanel");
    const nb = el.closest(".jp-Notebook");
    const insert = panel && panel.querySelector('.jp-Toolbar [data-command="notebook:insert-cell-below"]');
    if (!cell || !nb || !insert) return false;
    const before = new Set(nb.querySelectorAll(".jp-Cell"));
    const prompt = cell.querySelector(".jp-InputPrompt") || cell;
    for (const type of ["mousedown", "mouseup"]) prompt.dispatchEvent(new win.MouseEvent(type, { bubbles: true, button: 0 }));
    if (!(await waitFor(() => cell.classList.contains("jp-mod-active"), 1000))) return false;
    // JupyterLab's toolbar buttons act on mousedown (or on click when they say so): send the whole press
    const press = insert.querySelector("button") || insert;
    for (const type of ["mousedown", "mouseup", "click"]) press.dispatchEvent(new win.MouseEvent(type, { bubbles: true, cancelable: true, button: 0 }));
    const added = await waitFor(() => Array.from(nb.querySelectorAll(".jp-Cell")).find((c) => !before.has(c)));
    const editor = added && (await waitFor(() => added.querySelector(".cm-content")));
    if (!editor) return false;
    pasteInto(editor, code);
    const text = () => Array.from(added.querySelectorAll(".cm-line")).map((l) => l.textContent).join("\n");
    if (await waitFor(() => text().trim() === code.trim(), 1000)) return true;
    return false;
  }
  listen(log, "click", (e) => {
    const btn = e.target && e.target.closest ? e.target.closest(".mmsp-insert-code") : null;
    if (!btn || !log.contains(btn)) return;
    const pre = btn.closest(".mmsp-code") && btn.closest(".mmsp-code").querySelector("pre");
    if (!pre) return;
    const code = pre.textContent.replace(/\n$/, "");
    insertIntoNewCell(code).then(
      (ok) => {
        if (ok) return;
        return Promise.resolve(copy(code)).then((copied) =>
          showNote(copied !== false ? "No notebook to insert into here: the code is copied, paste it into a cell." : "Could not insert or copy the code."),
        );
      },
      () => showNote("Could not insert the code into a new cell."),
    );
  });

  // ------------------------------------------------------------------ pickers
  function fillSelect(sel, list, value, emptyLabel) {
    const opts = optionList(list, emptyLabel);
    if (value !== undefined && value !== null && value !== "" && !opts.some((o) => o.value === String(value))) {
      opts.unshift({ value: String(value), label: String(value) });
    }
    const sig = JSON.stringify(opts);
    if (sel.dataset.sig !== sig) {
      sel.dataset.sig = sig;
      sel.textContent = "";
      for (const o of opts) sel.appendChild(h(doc, "option", null, { value: o.value }, o.label));
    }
    if (value !== undefined && value !== null) sel.value = String(value);
    return opts.length;
  }

  function drawModels() {
    const n = fillSelect(modelSel, model.get("models"), model.get("model"));
    modelLabel.hidden = n === 0;
  }
  function drawThinking() {
    const levels = model.get("thinking_levels");
    fillSelect(thinkSel, levels, model.get("thinking"), "model default");
    thinkLabel.hidden = !Array.isArray(levels) || levels.length === 0;
  }
  // A message to the kernel: one whose kernel is gone (restarted) says so, here, instead of throwing.
  const tell = sender(model, () => showNote(NO_KERNEL));
  // (a message, not save_changes: that would send the kernel the transcript this model keeps too)
  const pick = (name, value) => {
    model.set(name, value);
    tell({ type: "pick", [name]: value });
  };
  listen(modelSel, "change", () => pick("model", modelSel.value));
  listen(thinkSel, "change", () => pick("thinking", thinkSel.value));

  // ------------------------------------------------------------------ busy / error
  function drawBusy() {
    const b = busy();
    watchKernel(b);
    sendBtn.textContent = b ? "Stop" : "Send";
    sendBtn.setAttribute("aria-label", b ? "Stop generating" : "Send message");
    sendBtn.title = b ? "Stop generating (Esc)" : "Send message (Enter)";
    sendBtn.classList.toggle("mmsp-stop", b);
    sendBtn.classList.toggle("mmsp-primary", !b);
    root.classList.toggle("mmsp-busy", b);
    if (!b && note.textContent === WAIT_NOTE) showNote("");
    updateRetry();
  }
  // A failed turn says so in its own banner, with a Retry under it: the chat's banner is for what
  // failed outside a turn (a message that could not be sent), never a second copy of the turn's.
  function lastTurnFailed() {
    const all = live ? [...entries, live] : entries;
    for (let k = all.length - 1; k >= 0; k--) if (all[k].view) return FAILED.has(all[k].view.status);
    return false;
  }
  function drawError() {
    const e = model.get("error");
    const text = typeof e === "string" ? e : e ? JSON.stringify(e) : "";
    errorText.textContent = text;
    errorBanner.hidden = !text || text === errorDismissed || lastTurnFailed();
  }
  listen(errorClose, "click", () => {
    errorDismissed = errorText.textContent;
    errorBanner.hidden = true;
    input.focus(); // (the button is hidden with its banner)
  });

  // ------------------------------------------------------------------ a kernel that stops answering
  let watch = null;
  function watchKernel(on) {
    if (on && watch === null) {
      heard = Date.now();
      watch = win.setInterval(checkKernel, 500);
    } else if (!on && watch !== null) {
      win.clearInterval(watch);
      watch = null;
    }
  }
  cleanups.push(() => watchKernel(false));
  function checkKernel() {
    if (Date.now() - heard >= DEAD_MS) kernelGone();
  }
  let cut = null; // the live turn as it was before it was cut here: {live, status, banner}
  function kernelGone() {
    gone = true;
    if (live) {
      // what arrived stays, marked as cut (the kernel that would say so is gone: worded here)
      const vm = live.view.viewModel();
      cut = { live, status: vm.status, banner: vm.banner };
      live.view.apply([["turn", { status: "incomplete", banner: { kind: "error", lead: "", text: DEAD_NOTE } }]]);
      live.el.classList.add("mmsp-cut-off");
    }
    showNote(DEAD_NOTE);
    drawBusy();
  }
  function heardFromKernel() {
    heard = Date.now();
    answered();
    if (!gone) return;
    gone = false; // it was only slow: it goes on drawing what it sends
    // The kernel sends a turn's status and banner only when they change on its side: the reply it
    // goes on with gets back what it showed before the cut.
    if (cut && cut.live === live) {
      live.view.apply([["turn", { status: cut.status, banner: cut.banner }]]);
      live.el.classList.remove("mmsp-cut-off");
    }
    cut = null;
    if (note.textContent === DEAD_NOTE) showNote("");
    drawBusy();
  }

  // ------------------------------------------------------------------ composing
  function showNote(text) {
    note.textContent = text || "";
    note.hidden = !text;
  }

  function drawAttachments() {
    attachments.textContent = "";
    pending.forEach((a, k) => {
      const wrap = h(doc, "div", "mmsp-attachment");
      wrap.appendChild(h(doc, "img", "mmsp-thumb", { src: a.src, alt: `attachment ${k + 1}` }));
      const rm = button(doc, "mmsp-btn mmsp-btn-icon mmsp-remove", "×", `Remove image ${k + 1}`);
      rm.addEventListener("click", () => {
        pending.splice(k, 1);
        drawAttachments();
        input.focus();
      });
      wrap.appendChild(rm);
      attachments.appendChild(wrap);
    });
    attachments.hidden = pending.length === 0;
  }

  function readAsDataURL(file) {
    return new Promise((resolve, reject) => {
      const r = new win.FileReader();
      r.onload = () => resolve(String(r.result));
      r.onerror = () => reject(r.error || new Error("could not read the file"));
      r.readAsDataURL(file);
    });
  }

  async function addFiles(files) {
    const list = Array.from(files || []).filter((f) => f && typeof f.type === "string" && f.type.startsWith("image/"));
    const added = [];
    for (const f of list) {
      if (!IMAGE_TYPES.test(f.type)) {
        showNote(`${f.type} is not supported: attach PNG, JPEG, GIF or WebP images.`);
        continue;
      }
      if (f.size > MAX_IMAGE_BYTES) {
        showNote(`${f.name || "image"} is larger than 20 MB.`);
        continue;
      }
      try {
        const src = await readAsDataURL(f);
        if (isSafeImageSrc(src)) {
          pending.push({ src });
          added.push(src);
        } else showNote("That image could not be attached.");
      } catch (err) {
        showNote(`Could not read the image: ${err && err.message ? err.message : err}`);
      }
    }
    if (added.length) {
      showNote("");
      drawAttachments();
    }
    return added;
  }

  function imageFilesOf(dt) {
    if (!dt) return [];
    const out = [];
    if (dt.items && dt.items.length) {
      for (const it of Array.from(dt.items)) {
        if (it.kind === "file" && typeof it.type === "string" && it.type.startsWith("image/")) {
          const f = it.getAsFile();
          if (f) out.push(f);
        }
      }
    }
    if (!out.length && dt.files) for (const f of Array.from(dt.files)) if (f.type && f.type.startsWith("image/")) out.push(f);
    return out;
  }

  listen(root, "paste", (e) => {
    const files = imageFilesOf(e.clipboardData);
    if (!files.length) return;
    const types = e.clipboardData && e.clipboardData.types ? Array.from(e.clipboardData.types) : [];
    if (!types.includes("text/plain")) e.preventDefault();
    addFiles(files);
  });
  listen(root, "dragover", (e) => {
    const types = e.dataTransfer && e.dataTransfer.types ? Array.from(e.dataTransfer.types) : [];
    if (types.includes("Files")) {
      e.preventDefault();
      root.classList.add("mmsp-dragging");
    }
  });
  listen(root, "dragleave", (e) => {
    if (!e.relatedTarget || !root.contains(e.relatedTarget)) root.classList.remove("mmsp-dragging");
  });
  listen(root, "drop", (e) => {
    root.classList.remove("mmsp-dragging");
    const files = imageFilesOf(e.dataTransfer);
    if (!files.length) return;
    e.preventDefault();
    addFiles(files);
  });
  listen(attachBtn, "click", () => fileInput.click());
  listen(fileInput, "change", () => {
    addFiles(fileInput.files).then(() => {
      fileInput.value = "";
    });
  });

  function send() {
    const text = input.value;
    if (!text.trim() && pending.length === 0) return false;
    if (busy()) {
      showNote(WAIT_NOTE);
      return false;
    }
    const id = `${viewId}-${++sends}`;
    try {
      model.send({ type: "send", text, images: pending.map((a) => a.src), id });
    } catch {
      showNote(NO_KERNEL); // (a restarted kernel's chat: the message stays in the box)
      return false;
    }
    awaitAnswer(id, text, pending);
    input.value = "";
    pending = [];
    drawAttachments();
    showNote("");
    stick = true;
    scrollToEnd();
    return true;
  }

  // ------------------------------------------------------------------ a message the kernel does not answer, or refuses
  const viewId = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}-${++views}`;
  let sends = 0;
  // {id, text, images, timer, back}: the last message sent, until the kernel says anything; `back`
  // while it is in the box again (put back there, not taken out since)
  let unanswered = null;
  let lastSent = null; // the same message, until the kernel refuses it or another one is sent
  function awaitAnswer(id, text, images) {
    answered();
    unanswered = lastSent = { id, text, images: images.slice(), back: false, timer: null };
    const u = unanswered;
    u.timer = win.setTimeout(() => {
      if (unanswered !== u || input.value || pending.length) return; // (something new is being written)
      u.back = true;
      input.value = u.text;
      pending = u.images.slice();
      drawAttachments();
      showNote(NO_ANSWER);
    }, ACK_MS);
  }
  function answered() {
    const u = unanswered;
    if (!u) return;
    unanswered = null;
    win.clearTimeout(u.timer);
    if (!u.back) return;
    // it was sent after all (the kernel was busy): out of the box again, unless it was edited since
    if (input.value === u.text && pending.length === u.images.length && pending.every((a, k) => a === u.images[k])) {
      input.value = "";
      pending = [];
      drawAttachments();
      u.back = false;
    }
    if (note.textContent === NO_ANSWER) showNote("");
  }
  // The kernel refused the message (a reply another view started streams, or one cut here still
  // runs there; a text it cannot take): no transcript entry holds it, and any word from the kernel
  // (a heartbeat, the error, another view's message) may have taken it for answered already. It
  // comes back into the box, as one not answered does. What was written since is kept: the refused
  // text goes before it (written first; the caret stays at the end, where the writing goes on), its
  // images before those attached since, and the note says so.
  function refused(id, error) {
    const s = lastSent;
    if (!s || typeof id !== "string" || s.id !== id) return; // (another view's message, or an earlier one)
    lastSent = null;
    if (unanswered === s) {
      win.clearTimeout(s.timer);
      unanswered = null;
    }
    const said = typeof error === "string" && error && (errorBanner.hidden || errorText.textContent !== error) ? `: ${error}` : " (the error above says why)";
    if (s.back) return showNote(`Not sent${said}. Your message is in the box.`); // (put back already, maybe edited since)
    const since = !!input.value.trim() || pending.length > 0;
    input.value = since ? [s.text, input.value].filter(Boolean).join("\n\n") : s.text;
    pending = [...s.images, ...pending];
    drawAttachments();
    showNote(`Not sent${said}. Your message is back in the box${since ? ", before what you wrote since" : ""}.`);
  }
  cleanups.push(() => {
    if (unanswered) win.clearTimeout(unanswered.timer);
    unanswered = lastSent = null;
  });

  // ------------------------------------------------------------------ keys stay in the widget
  keysStayIn(root, listen);

  listen(input, "keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      send();
    } else if (e.key === "Escape" && busy()) {
      e.preventDefault();
      tell({ type: "stop" });
    }
  });
  listen(sendBtn, "click", () => {
    if (busy()) tell({ type: "stop" });
    else send();
    input.focus();
  });
  listen(newBtn, "click", () => {
    if (!tell({ type: "new_chat" })) return; // (what is attached stays, as the conversation does)
    pending = [];
    drawAttachments();
    showNote("");
  });

  // ------------------------------------------------------------------ model events
  const onMsg = (msg) => {
    if (!msg || typeof msg !== "object") return;
    heardFromKernel(); // any message: ops, a snapshot, a heartbeat (which needs nothing more)
    if (msg.type === "ops") applyOps(msg.turn, msg.ops);
    else if (msg.type === "refused") refused(msg.id, msg.error);
    else if (msg.type === "chat_snapshot" && msg.chat && typeof msg.chat === "object") {
      const c = msg.chat;
      const t = Array.isArray(c.transcript) ? c.transcript : model.get("transcript");
      drawTranscript(t);
      if (c.live && typeof c.live === "object" && Object.keys(c.live).length) {
        liveAt(entries.length).view.render(c.live);
      } else if (live) {
        dropEntry(live);
        live = null;
      }
      updateRetry();
      scrollToEnd();
    }
  };
  on("msg:custom", onMsg);
  on("change:transcript", () => {
    answered();
    drawTranscript(model.get("transcript"));
  });
  on("change:busy", () => {
    heardFromKernel();
    drawBusy();
  });
  on("change:models", drawModels);
  on("change:model", drawModels);
  on("change:thinking_levels", drawThinking);
  on("change:thinking", drawThinking);
  // (an error answers no message: one the kernel refuses comes with a refused message, one it takes
  // with its transcript entry; an error counted as an answer would stop the message coming back)
  on("change:error", drawError);

  drawModels();
  drawThinking();
  drawBusy();
  drawError();
  drawTranscript(model.get("transcript"));
  tell({ type: "hello" });

  const dispose = () => {
    for (const c of cleanups.splice(0)) c();
    for (const e of entries) dispose1(e);
    if (live) dispose1(live);
    entries = [];
    live = null;
    root.remove();
    el.classList.remove("mmsp-root", "mmsp-chat-widget");
  };
  function dispose1(e) {
    if (e.view) e.view.destroy();
  }
  return dispose;
}

/**
 * Keep the transcript in the model's state from the kernel's messages (once per model: the
 * widget's initialize). A change whose start this model never got (sent before the page loaded the
 * widget) asks for the whole conversation again.
 */
export function keepTranscript(model) {
  const onMsg = (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "transcript" && Number.isInteger(msg.at) && msg.at >= 0 && Array.isArray(msg.entries)) {
      const now = model.get("transcript");
      const kept = Array.isArray(now) ? now : [];
      if (msg.at > kept.length) {
        try {
          model.send({ type: "hello" }); // answered with a chat_snapshot
        } catch {
          // no kernel: nothing more will come
        }
        return;
      }
      model.set("transcript", [...kept.slice(0, msg.at), ...msg.entries]);
    } else if (msg.type === "chat_snapshot" && msg.chat && Array.isArray(msg.chat.transcript)) {
      model.set("transcript", msg.chat.transcript);
    }
  };
  model.on("msg:custom", onMsg);
  return () => {
    if (typeof model.off === "function") model.off("msg:custom", onMsg);
  };
}

function initializeChat({ model }) {
  return keepTranscript(model);
}

export default { initialize: initializeChat, render: renderChatWidget };
