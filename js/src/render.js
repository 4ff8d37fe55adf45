// The one renderer of an assistant turn, used by TurnView (turn.js) and Chat (chat.js).
//
//   const view = createTurnView(container, {onCopy, onUpdate});
//   view.render(viewModel);   // draw a whole turn (PROTOCOL.md, "View model of a turn")
//   view.apply(ops);          // incremental ops: item / append / set / turn / event
//   view.destroy();
//
// A template of the view model: every label, state, banner and footer string is decided in Python
// (mmsp_notebook/views/model.py) and placed here as it comes; nothing is worded or formatted here.
// mmsp_notebook/views/html.py is the same template for the static HTML (tests/test_html.py checks
// that both draw the same DOM). Untrusted strings go in with textContent; only DOMPurify output (as
// a DOM fragment) is inserted as markup (markdown.js). Text appends are batched and drawn once per
// animation frame.

import { StreamingMarkdown, focusables } from "./markdown.js";
import { h, isSafeImageSrc, isSafeAudioSrc, str, copyText, flashCopied, frameScheduler } from "./util.js";

// The states and kinds that become class names; anything else falls back to the default.
const RESULT_STATES = ["ok", "err", "running", "stopped"];
const BANNER_KINDS = ["warn", "error", "muted"];
const STAT_KEY = /^[a-z_]+$/;
const MAX_EVENT_ROWS = 5000;

function oneOf(value, allowed, fallback) {
  return allowed.includes(value) ? value : fallback;
}

/** An item's tag and meta as one line (html.py ``_line``). */
function line(item) {
  return [item.tag, item.meta].filter(Boolean).join(" · ");
}

function clone(v) {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
}

/**
 * @param {HTMLElement} container
 * @param {{onCopy?: (text: string) => any, onUpdate?: () => void, schedule?: {request, cancel}}} [options]
 */
export function createTurnView(container, options = {}) {
  const doc = container.ownerDocument;
  const win = doc.defaultView;
  const sched = options.schedule || frameScheduler(win);
  const copy = options.onCopy || ((text) => copyText(text, doc));

  const root = h(doc, "div", "mmsp-root mmsp-turn");
  const itemsEl = h(doc, "div", "mmsp-items");
  const statusEl = h(doc, "div", "mmsp-status", { role: "status", "aria-live": "polite" });
  const footerEl = h(doc, "div", "mmsp-footer");
  root.append(itemsEl, statusEl, footerEl);
  container.appendChild(root);

  let turn = emptyTurn();
  let views = []; // item views sorted by i
  let eventsEl = null;
  let eventsBody = null;
  let eventsCount = null;
  let frame = null;
  let destroyed = false;

  // ---- clicks: copy buttons inside Markdown code blocks (delegated, survives re-renders) ----
  const onClick = (e) => {
    const t = e.target;
    const btn = t && t.closest ? t.closest(".mmsp-copy-code") : null;
    if (!btn || !root.contains(btn)) return;
    const wrap = btn.closest(".mmsp-code");
    const pre = wrap && wrap.querySelector("pre");
    if (!pre) return;
    Promise.resolve(copy(pre.textContent)).then(
      (ok) => flashCopied(btn, ok !== false),
      () => flashCopied(btn, false),
    );
  };
  root.addEventListener("click", onClick);

  function emptyTurn() {
    return { id: null, model: null, status: null, items: [], banner: null, footer: null };
  }

  // ------------------------------------------------------------------ whole render
  function render(vm) {
    if (destroyed) return;
    if (frame !== null) {
      sched.cancel(frame);
      frame = null;
    }
    const focus = focusedItem();
    for (const v of views) {
      v.dispose();
      v.el.remove();
    }
    views = [];
    const src = vm && typeof vm === "object" ? vm : {};
    // A view model carries no events: the table stays for the turn it shows (a snapshot answering a
    // hello, the turn's trait at its end) and starts over with another turn (TurnView.reset).
    if ((src.id ?? null) !== turn.id) clearEvents();
    turn = { ...emptyTurn(), ...clone(src), items: [] };
    const items = Array.isArray(src.items) ? src.items.slice().sort((a, b) => a.i - b.i) : [];
    for (const it of items) addItem(clone(it), true);
    for (const v of views) v.flush(finished(v));
    syncThinkingOpen();
    drawStatus();
    drawFooter();
    refocusItem(focus);
    notify();
  }

  // A whole render draws the items again: an element of an item that had the focus (a code block's
  // Copy button, a link) hands it on to its counterpart in the item drawn again, or to that item
  // (or the turn), never to the page, where the next keys would be the notebook's shortcuts.
  function focusedItem() {
    const active = doc.activeElement;
    if (!active || !itemsEl.contains(active)) return null;
    const v = views.find((x) => x.el.contains(active));
    if (!v) return null;
    return { node: active, i: v.item.i, index: focusables(v.el, false).indexOf(active) };
  }

  function refocusItem(f) {
    if (!f || f.node.isConnected) return;
    const now = doc.activeElement;
    if (now && now !== doc.body && now.isConnected) return;
    const v = find(f.i);
    let target = v && f.index >= 0 ? focusables(v.el, false)[f.index] : null;
    if (!target) {
      target = v ? v.el : root;
      if (!target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
    }
    target.focus({ preventScroll: true });
  }

  // ------------------------------------------------------------------ ops
  function apply(ops) {
    if (destroyed || !Array.isArray(ops)) return;
    let structural = false;
    for (const op of ops) {
      if (!Array.isArray(op) || op.length < 2) continue;
      const [kind, a, b] = op;
      if (kind === "append") {
        const v = find(a);
        if (v && typeof b === "string" && b) {
          v.item.text = (v.item.text || "") + b;
          v.append(b);
        }
      } else if (kind === "item") {
        const fields = { ...(b || {}), i: a };
        const existing = find(a);
        if (existing && rekind(existing, clone(fields))) {
          // (drawn again as its new kind)
        } else if (existing) {
          Object.assign(existing.item, clone(fields));
          existing.update();
        } else {
          addItem({ text: "", ...clone(fields) }, false);
        }
        structural = true;
      } else if (kind === "set") {
        const v = find(a);
        if (!v) continue;
        const fields = clone(b || {});
        if (rekind(v, fields)) {
          structural = true;
          continue;
        }
        if (typeof fields.text === "string" && fields.text !== v.item.text) {
          v.item.text = fields.text;
          v.resetText();
        }
        delete fields.text;
        delete fields.i;
        Object.assign(v.item, fields);
        v.update();
        if (finished(v)) v.flush(true);
      } else if (kind === "turn") {
        Object.assign(turn, clone(a || {}));
        structural = true;
        if (turnEnded()) for (const v of views) v.flush(true);
        drawStatus();
        drawFooter();
      } else if (kind === "event") {
        addEvent(a || {}, b);
      }
    }
    if (structural) syncThinkingOpen();
    scheduleFlush();
    notify();
  }

  // The turn is over (complete, or cut by Stop or an error): an item it ended while it streamed
  // keeps that status, and its text is what there is (a table's row without its newline is drawn).
  function turnEnded() {
    return typeof turn.status === "string" && turn.status !== "" && turn.status !== "streaming";
  }

  /** Whether an item's text is complete: the item is done, or the turn is over. */
  function finished(v) {
    return v.item.status !== "streaming" || turnEnded();
  }

  // An item whose kind changes (inline data whose MIME type came after its first delta: data, then
  // an image) is drawn again as its kind; null fields are ones the item no longer has.
  function rekind(v, fields) {
    if (typeof fields.kind !== "string" || fields.kind === v.item.kind) return false;
    const item = { ...v.item, ...fields, i: v.item.i };
    for (const key of Object.keys(item)) if (item[key] === null) delete item[key];
    const nv = makeItemView(item);
    v.el.replaceWith(nv.el);
    v.dispose();
    views[views.indexOf(v)] = nv;
    nv.flush(finished(nv));
    return true;
  }

  function find(i) {
    for (const v of views) if (v.item.i === i) return v;
    return null;
  }

  function addItem(item, whole) {
    const v = makeItemView(item);
    let at = views.length;
    while (at > 0 && views[at - 1].item.i > item.i) at--;
    views.splice(at, 0, v);
    const next = views[at + 1];
    itemsEl.insertBefore(v.el, next ? next.el : null);
    if (!whole) v.flush(false);
    return v;
  }

  function scheduleFlush() {
    if (frame !== null || destroyed) return;
    if (!views.some((v) => v.dirty)) return;
    frame = sched.request(() => {
      frame = null;
      flush();
    });
  }

  /** Draw pending text now (also used by tests and before reading the DOM). */
  function flush() {
    if (destroyed) return;
    if (frame !== null) {
      sched.cancel(frame);
      frame = null;
    }
    let changed = false;
    for (const v of views) if (v.dirty) changed = v.flush(finished(v)) || changed;
    if (changed) notify();
  }

  function notify() {
    if (options.onUpdate) {
      try {
        options.onUpdate();
      } catch (e) {
        console.error(e);
      }
    }
  }

  // A thinking block stays open while nothing follows it, and collapses once a later item starts,
  // unless the reader toggled it themselves.
  function syncThinkingOpen() {
    for (let k = 0; k < views.length; k++) {
      const v = views[k];
      if (!v.details || v.userToggled) continue;
      const open = k === views.length - 1;
      if (v.details.open !== open) v.details.open = open;
    }
  }

  // ------------------------------------------------------------------ items
  function makeItemView(item) {
    switch (item.kind) {
      case "text":
        return textView(item);
      case "thinking":
        return thinkingView(item);
      case "inline_thinking":
        return inlineThinkingView(item);
      case "tool_call":
        return toolView(item);
      case "image":
        return imageView(item);
      case "audio":
        return audioView(item);
      case "embedding":
        return embeddingView(item);
      default:
        return dataView(item);
    }
  }

  function base(item, cls, tag = "div") {
    const el = h(doc, tag, `mmsp-item ${cls}`);
    return {
      item,
      el,
      details: null,
      userToggled: false,
      get dirty() {
        return false;
      },
      append() {},
      resetText() {},
      flush() {
        return false;
      },
      update() {},
      dispose() {},
    };
  }

  function setStatusAttr(v) {
    v.el.setAttribute("data-status", v.item.status || "");
  }

  function textView(item) {
    const v = base(item, "mmsp-text mmsp-md");
    const md = new StreamingMarkdown(v.el);
    md.append(item.text || "");
    Object.defineProperty(v, "dirty", { get: () => md.dirty || (finished(v) && !md.final) });
    v.append = (s) => md.append(s);
    v.resetText = () => md.reset(v.item.text || "");
    v.flush = (finished) => md.flush(finished);
    v.dispose = () => md.dispose();
    v.update = () => setStatusAttr(v);
    v.update();
    return v;
  }

  function badgeOf(item) {
    const b = item.badge;
    if (!b || typeof b !== "object" || !b.text) return null;
    return h(doc, "span", "mmsp-badge", b.title ? { title: b.title } : null, b.text);
  }

  function detailsView(item, cls) {
    const v = base(item, `mmsp-thinking ${cls}`);
    const details = h(doc, "details", "mmsp-details", { open: true });
    const summary = h(doc, "summary", "mmsp-summary");
    const label = h(doc, "span", "mmsp-summary-label");
    const badgeSlot = h(doc, "span", "mmsp-badge-slot");
    summary.append(label, badgeSlot);
    const body = h(doc, "div", "mmsp-thinking-body");
    details.append(summary, body);
    v.el.appendChild(details);
    v.details = details;
    summary.addEventListener("click", () => {
      v.userToggled = true;
    });
    let badgeKey = null;
    v.setSummary = () => {
      const text = v.item.label || "";
      if (label.textContent !== text) label.textContent = text;
      const key = JSON.stringify(v.item.badge || null);
      if (key !== badgeKey) {
        badgeKey = key;
        badgeSlot.textContent = "";
        const b = badgeOf(v.item);
        if (b) badgeSlot.appendChild(b);
      }
    };
    v.body = body;
    return v;
  }

  function thinkingView(item) {
    const v = detailsView(item, "");
    let node = doc.createTextNode(item.text || "");
    v.body.appendChild(node);
    v.append = (s) => node.appendData(s);
    v.resetText = () => {
      node.data = v.item.text || "";
    };
    v.update = () => {
      setStatusAttr(v);
      v.setSummary();
    };
    v.update();
    return v;
  }

  function inlineThinkingView(item) {
    const v = detailsView(item, "mmsp-inline-thinking");
    const info = h(doc, "div", "mmsp-meta");
    v.body.appendChild(info);
    v.update = () => {
      setStatusAttr(v);
      v.setSummary();
      info.textContent = v.item.meta || "";
    };
    v.update();
    return v;
  }

  function toolView(item) {
    const v = base(item, "mmsp-tool");
    const head = h(doc, "div", "mmsp-tool-head");
    const icon = h(doc, "span", "mmsp-tool-icon", { "aria-hidden": "true" }, "⚙");
    const label = h(doc, "span", "mmsp-tool-label");
    const name = h(doc, "code", "mmsp-tool-name", { dir: "auto" }); // a name the model gives: isolated (bidi)
    const state = h(doc, "span", "mmsp-tool-state");
    head.append(icon, label, name, state);
    const args = h(doc, "pre", "mmsp-tool-args", { "aria-label": "arguments" });
    const argsNode = doc.createTextNode(item.text || "");
    args.appendChild(argsNode);
    const result = h(doc, "div", "mmsp-tool-result");
    v.el.append(head, args, result);
    let parsedShown = null;
    let resultKey = null;
    v.append = (s) => {
      if (parsedShown === null) argsNode.appendData(s);
    };
    v.resetText = () => {
      if (parsedShown === null) argsNode.data = v.item.text || "";
    };
    v.update = () => {
      const it = v.item;
      setStatusAttr(v);
      v.el.setAttribute("data-state", it.state || "");
      label.textContent = it.tag || "";
      name.textContent = it.name || "";
      if (it.title) name.title = it.title;
      else name.removeAttribute("title");
      const want = typeof it.args === "string" ? it.args : null;
      if (want !== parsedShown) {
        parsedShown = want;
        argsNode.data = want === null ? it.text || "" : want;
        args.classList.toggle("mmsp-parsed", want !== null);
      }
      const r = it.result && typeof it.result === "object" ? it.result : null;
      const key = JSON.stringify(r);
      if (key !== resultKey) {
        resultKey = key;
        result.textContent = "";
        result.className = "mmsp-tool-result";
        if (r) {
          result.classList.add(`mmsp-${oneOf(r.state, RESULT_STATES, "ok")}`);
          const rh = h(doc, "div", "mmsp-tool-result-head");
          rh.appendChild(h(doc, "span", "mmsp-tool-result-label", null, r.label || ""));
          if (r.took) rh.appendChild(h(doc, "span", "mmsp-meta", null, r.took));
          result.appendChild(rh);
          if (typeof r.text === "string") result.appendChild(h(doc, "pre", "mmsp-tool-output", null, r.text));
        }
      }
      state.textContent = it.state_text || "";
    };
    v.update();
    return v;
  }

  function srcKey(src) {
    return typeof src === "string" ? `${src.length}:${src.slice(0, 64)}${src.slice(-16)}` : src ? "?" : "";
  }

  function imageView(item) {
    const v = base(item, "mmsp-image");
    let shown = null;
    v.update = () => {
      const it = v.item;
      setStatusAttr(v);
      const key = `${srcKey(it.src)}|${line(it)}|${it.alt}|${it.rejected}`;
      if (key === shown) return;
      shown = key;
      v.el.textContent = "";
      if (isSafeImageSrc(it.src)) {
        v.el.appendChild(h(doc, "img", "mmsp-img", { src: it.src, alt: it.alt || "", loading: "lazy" }));
      } else if (!it.src) {
        v.el.appendChild(h(doc, "div", "mmsp-meta", null, line(it)));
      } else {
        v.el.appendChild(h(doc, "div", "mmsp-meta mmsp-rejected", null, it.rejected || ""));
      }
    };
    v.update();
    return v;
  }

  function audioView(item) {
    const v = base(item, "mmsp-audio");
    let shown = null;
    v.update = () => {
      const it = v.item;
      setStatusAttr(v);
      const caption = line(it);
      const key = `${srcKey(it.src)}|${caption}|${it.rejected}`;
      if (key === shown) return;
      shown = key;
      v.el.textContent = "";
      if (isSafeAudioSrc(it.src)) {
        v.el.appendChild(h(doc, "audio", "mmsp-audio-player", { controls: true, src: it.src, "aria-label": caption, preload: "metadata" }));
        v.el.appendChild(h(doc, "div", "mmsp-meta", null, caption));
      } else if (it.src) {
        v.el.appendChild(h(doc, "div", "mmsp-meta mmsp-rejected", null, it.rejected || ""));
      } else {
        v.el.appendChild(h(doc, "div", "mmsp-meta", null, caption));
      }
    };
    v.update();
    return v;
  }

  function embeddingView(item) {
    const v = base(item, "mmsp-embedding");
    const meta = h(doc, "div", "mmsp-meta");
    const prev = h(doc, "code", "mmsp-embedding-preview");
    v.el.append(meta, prev);
    v.update = () => {
      setStatusAttr(v);
      meta.textContent = line(v.item);
      prev.textContent = typeof v.item.preview === "string" ? v.item.preview : "";
    };
    v.update();
    return v;
  }

  function dataView(item) {
    const v = base(item, "mmsp-data");
    const meta = h(doc, "div", "mmsp-meta");
    v.el.appendChild(meta);
    v.update = () => {
      setStatusAttr(v);
      meta.textContent = line(v.item);
    };
    v.update();
    return v;
  }

  // ------------------------------------------------------------------ banner and footer
  function drawStatus() {
    const b = turn.banner && typeof turn.banner === "object" ? turn.banner : null;
    statusEl.textContent = "";
    statusEl.className = "mmsp-status";
    root.setAttribute("data-status", turn.status || "");
    if (b && b.kind === "streaming") {
      const ind = h(doc, "span", "mmsp-streaming");
      ind.appendChild(h(doc, "span", "mmsp-dot", { "aria-hidden": "true" }));
      ind.appendChild(h(doc, "span", "mmsp-streaming-label", null, b.text || ""));
      statusEl.appendChild(ind);
    } else if (b) {
      statusEl.classList.add("mmsp-banner", `mmsp-${oneOf(b.kind, BANNER_KINDS, "muted")}`);
      if (b.lead) statusEl.appendChild(h(doc, "strong", "mmsp-banner-lead", null, b.lead));
      statusEl.appendChild(h(doc, "span", "mmsp-banner-text", null, b.text || ""));
      if (b.detail) statusEl.appendChild(h(doc, "div", "mmsp-banner-detail", null, b.detail));
      if (b.hint) statusEl.appendChild(h(doc, "div", "mmsp-hint", null, b.hint));
    }
    statusEl.hidden = !statusEl.firstChild;
  }

  function drawFooter() {
    const f = turn.footer;
    footerEl.textContent = "";
    footerEl.hidden = !f;
    if (!f || typeof f !== "object" || !Array.isArray(f.stats)) return;
    for (const s of f.stats) {
      if (!Array.isArray(s) || !s[1]) continue;
      const [key, text, title] = s;
      const cls = typeof key === "string" && STAT_KEY.test(key) ? `mmsp-stat mmsp-${key}` : "mmsp-stat";
      footerEl.appendChild(h(doc, "span", cls, title ? { title } : null, text));
    }
  }

  // ------------------------------------------------------------------ events table
  function clearEvents() {
    if (eventsEl) eventsEl.remove();
    eventsEl = null;
    eventsBody = null;
    eventsCount = null;
  }

  function addEvent(row, label) {
    if (!eventsEl) {
      eventsEl = h(doc, "details", "mmsp-events", { open: true });
      const summary = h(doc, "summary", "mmsp-summary");
      summary.appendChild(h(doc, "span", null, null, "events "));
      eventsCount = h(doc, "span", "mmsp-meta");
      summary.appendChild(eventsCount);
      const scroll = h(doc, "div", "mmsp-events-scroll", { tabindex: "0", role: "region", "aria-label": "stream events" });
      const table = h(doc, "table", "mmsp-events-table");
      const thead = h(doc, "thead");
      const tr = h(doc, "tr");
      for (const c of ["n", "ms", "event_type", "type", "preview"]) tr.appendChild(h(doc, "th", null, { scope: "col" }, c));
      thead.appendChild(tr);
      eventsBody = h(doc, "tbody");
      table.append(thead, eventsBody);
      scroll.appendChild(table);
      eventsEl.append(summary, scroll);
      root.appendChild(eventsEl);
    }
    const scroll = eventsEl.querySelector(".mmsp-events-scroll");
    const atBottom = scroll.scrollHeight - scroll.scrollTop - scroll.clientHeight < 24;
    const tr = h(doc, "tr");
    for (const c of [row.n, row.ms, row.event_type, row.type, row.preview]) tr.appendChild(h(doc, "td", null, null, str(c)));
    eventsBody.appendChild(tr);
    if (eventsBody.childElementCount > MAX_EVENT_ROWS) eventsBody.firstChild.remove();
    if (typeof label === "string") eventsCount.textContent = label;
    if (atBottom) scroll.scrollTop = scroll.scrollHeight;
  }

  // ------------------------------------------------------------------ the rest of the API
  function getText() {
    return views
      .filter((v) => v.item.kind === "text")
      .map((v) => v.item.text || "")
      .join("\n\n");
  }

  function viewModel() {
    return { ...clone(turn), items: views.map((v) => clone(v.item)) };
  }

  function destroy() {
    if (destroyed) return;
    destroyed = true;
    if (frame !== null) sched.cancel(frame);
    frame = null;
    for (const v of views) v.dispose();
    root.removeEventListener("click", onClick);
    root.remove();
  }

  render(null);
  return { render, apply, flush, destroy, getText, viewModel, el: root, get status() { return turn.status; } };
}
