// The one renderer of an assistant turn, used by TurnView (turn.js) and Chat (chat.js).
//
//   const view = createTurnView(container, {onCopy, onUpdate});
//   view.render(viewModel);   // draw a whole turn (PROTOCOL.md, "View model of a turn")
//   view.apply(ops);          // incremental ops: item / append / set / turn / event
//   view.destroy();
//
// Untrusted strings go in with textContent; only DOMPurify output (as a DOM fragment) is inserted
// as markup (markdown.js). Text appends are batched and drawn once per animation frame.

import { StreamingMarkdown } from "./markdown.js";
import {
  h,
  isSafeImageSrc,
  isSafeAudioSrc,
  str,
  fmtSeconds,
  fmtBytes,
  fmtInt,
  copyText,
  flashCopied,
  frameScheduler,
} from "./util.js";

const STATUS_LABEL = {
  streaming: "streaming",
  complete: "complete",
  incomplete: "incomplete",
  error: "error",
  cancelled: "cancelled",
};

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
  let eventRows = 0;
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
    return { id: null, model: null, status: null, items: [], footer: null, error: null, status_text: "" };
  }

  // ------------------------------------------------------------------ whole render
  function render(vm) {
    if (destroyed) return;
    if (frame !== null) {
      sched.cancel(frame);
      frame = null;
    }
    for (const v of views) v.el.remove();
    views = [];
    const src = vm && typeof vm === "object" ? vm : {};
    turn = { ...emptyTurn(), ...clone(src), items: [] };
    const items = Array.isArray(src.items) ? src.items.slice().sort((a, b) => a.i - b.i) : [];
    for (const it of items) addItem(clone(it), true);
    for (const v of views) v.flush(v.item.status !== "streaming");
    syncThinkingOpen();
    drawStatus();
    drawFooter();
    notify();
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
        if (existing) {
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
        if (typeof fields.text === "string" && fields.text !== v.item.text) {
          v.item.text = fields.text;
          v.resetText();
        }
        delete fields.text;
        delete fields.i;
        Object.assign(v.item, fields);
        v.update();
        if (v.item.status !== "streaming") v.flush(true);
      } else if (kind === "turn") {
        Object.assign(turn, clone(a || {}));
        structural = true;
        if (turn.status && turn.status !== "streaming") for (const v of views) v.flush(v.item.status !== "streaming");
        for (const v of views) v.update();
        drawStatus();
        drawFooter();
      } else if (kind === "event") {
        addEvent(a || {});
      }
    }
    if (structural) syncThinkingOpen();
    scheduleFlush();
    notify();
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
    for (const v of views) if (v.dirty) changed = v.flush(v.item.status !== "streaming") || changed;
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
    };
  }

  function setStatusAttr(v) {
    v.el.setAttribute("data-status", v.item.status || "");
  }

  function textView(item) {
    const v = base(item, "mmsp-text mmsp-md");
    const md = new StreamingMarkdown(v.el);
    md.append(item.text || "");
    Object.defineProperty(v, "dirty", { get: () => md.dirty || (v.item.status !== "streaming" && !md.final) });
    v.append = (s) => md.append(s);
    v.resetText = () => md.reset(v.item.text || "");
    v.flush = (finished) => md.flush(finished);
    v.update = () => setStatusAttr(v);
    v.update();
    return v;
  }

  function thinkingSummary(item) {
    if (item.status === "streaming") {
      return turn.status && turn.status !== "streaming" ? "Thinking (stopped)" : "Thinking…";
    }
    return typeof item.duration === "number" ? `Thought for ${item.duration.toFixed(1)} s` : "Thought";
  }

  function fidelityBadge(item) {
    const keys = Array.isArray(item.fidelity) ? item.fidelity : item.fidelity && typeof item.fidelity === "object" ? Object.keys(item.fidelity) : [];
    if (!keys.length) return null;
    return h(doc, "span", "mmsp-badge", { title: `fidelity: ${keys.join(", ")}` }, "signed");
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
    v.setSummary = (text) => {
      if (label.textContent !== text) label.textContent = text;
      const keys = JSON.stringify(item.fidelity || []);
      if (keys !== badgeKey) {
        badgeKey = keys;
        badgeSlot.textContent = "";
        const b = fidelityBadge(v.item);
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
      v.setSummary(thinkingSummary(v.item));
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
      const it = v.item;
      const parts = ["Thinking (opaque)"];
      if (typeof it.bytes === "number") parts.push(fmtBytes(it.bytes));
      v.setSummary(it.status === "streaming" ? "Thinking (opaque)…" : parts.join(" · "));
      info.textContent = [it.mime_type || "", typeof it.bytes === "number" ? `${fmtInt(it.bytes)} bytes` : ""].filter(Boolean).join(" · ");
    };
    v.update();
    return v;
  }

  function toolView(item) {
    const v = base(item, "mmsp-tool");
    const head = h(doc, "div", "mmsp-tool-head");
    const icon = h(doc, "span", "mmsp-tool-icon", { "aria-hidden": "true" }, "⚙");
    const label = h(doc, "span", "mmsp-tool-label", null, "tool call");
    const name = h(doc, "code", "mmsp-tool-name");
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
      name.textContent = it.name || "";
      if (it.tool_call_id) name.title = `id ${it.tool_call_id}`;
      const hasArgs = it.status !== "streaming" && it.arguments !== undefined && it.arguments !== null;
      const want = hasArgs ? JSON.stringify(it.arguments, null, 2) : null;
      if (want !== parsedShown) {
        parsedShown = want;
        argsNode.data = want === null ? it.text || "" : want;
        args.classList.toggle("mmsp-parsed", want !== null);
      }
      const r = it.result;
      const key = JSON.stringify(r === undefined ? null : r);
      if (key !== resultKey) {
        resultKey = key;
        result.textContent = "";
        result.className = "mmsp-tool-result";
        if (r && typeof r === "object" && r.running) {
          result.classList.add("mmsp-running");
          const rh = h(doc, "div", "mmsp-tool-result-head");
          rh.appendChild(h(doc, "span", "mmsp-tool-result-label mmsp-meta", null, "running…"));
          result.appendChild(rh);
        } else if (r && typeof r === "object") {
          const ok = r.ok !== false && (r.error === null || r.error === undefined);
          result.classList.add(ok ? "mmsp-ok" : "mmsp-err");
          const rh = h(doc, "div", "mmsp-tool-result-head");
          rh.appendChild(h(doc, "span", "mmsp-tool-result-label", null, ok ? "result" : "error"));
          if (typeof r.duration === "number") rh.appendChild(h(doc, "span", "mmsp-meta", null, fmtSeconds(r.duration)));
          result.appendChild(rh);
          result.appendChild(h(doc, "pre", "mmsp-tool-output", null, ok ? str(r.output) : str(r.error ?? r.output)));
        }
      }
      const stopped = turn.status && turn.status !== "streaming";
      let tstate = "";
      if (it.status === "streaming") tstate = stopped ? "stopped" : "…";
      else if ((!r || r.running) && !stopped) tstate = "running…";
      else if (r && r.running) tstate = "stopped";
      state.textContent = tstate;
    };
    v.update();
    return v;
  }

  function imageView(item) {
    const v = base(item, "mmsp-image");
    let shown = null;
    v.update = () => {
      const it = v.item;
      setStatusAttr(v);
      const key = `${it.src === undefined ? "" : typeof it.src === "string" ? it.src.length + ":" + it.src.slice(0, 64) + it.src.slice(-16) : "?"}|${it.status}`;
      if (key === shown) return;
      shown = key;
      v.el.textContent = "";
      const mime = it.mime_type || "image";
      if (isSafeImageSrc(it.src)) {
        v.el.appendChild(h(doc, "img", "mmsp-img", { src: it.src, alt: it.alt || `generated image (${mime})`, loading: "lazy" }));
      } else if (it.src === undefined || it.src === null || it.src === "") {
        v.el.appendChild(h(doc, "div", "mmsp-meta", null, it.status === "streaming" ? `image (${mime})…` : `image (${mime})`));
      } else {
        v.el.appendChild(h(doc, "div", "mmsp-meta mmsp-rejected", null, `image (${mime}) not shown: only PNG, JPEG, GIF or WebP data URLs are displayed`));
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
      const key = `${typeof it.src === "string" ? it.src.length + ":" + it.src.slice(0, 64) + it.src.slice(-16) : ""}|${it.status}|${it.seconds}`;
      if (key === shown) return;
      shown = key;
      v.el.textContent = "";
      const mime = it.mime_type || "audio";
      const caption = ["audio", mime, typeof it.seconds === "number" ? `${it.seconds.toFixed(1)} s` : ""].filter(Boolean).join(" · ");
      if (isSafeAudioSrc(it.src)) {
        v.el.appendChild(h(doc, "audio", "mmsp-audio-player", { controls: true, src: it.src, "aria-label": caption, preload: "metadata" }));
        v.el.appendChild(h(doc, "div", "mmsp-meta", null, caption));
      } else if (typeof it.src === "string" && it.src) {
        v.el.appendChild(h(doc, "div", "mmsp-meta mmsp-rejected", null, `${caption} — not shown: not a base64 audio data URL`));
      } else {
        v.el.appendChild(h(doc, "div", "mmsp-meta", null, it.status === "streaming" ? `${caption}…` : caption));
      }
    };
    v.update();
    return v;
  }

  function embeddingView(item) {
    const v = base(item, "mmsp-embedding");
    const line = h(doc, "div", "mmsp-meta");
    const prev = h(doc, "code", "mmsp-embedding-preview");
    v.el.append(line, prev);
    v.update = () => {
      const it = v.item;
      setStatusAttr(v);
      const parts = ["embedding"];
      if (typeof it.dims === "number") parts.push(`${it.dims} dims`);
      if (typeof it.norm === "number") parts.push(`norm ${it.norm.toFixed(3)}`);
      line.textContent = parts.join(" · ");
      const p = Array.isArray(it.preview) ? it.preview.slice(0, 8) : [];
      const more = typeof it.dims === "number" ? it.dims > p.length : Array.isArray(it.preview) && it.preview.length > p.length;
      prev.textContent = p.length ? `[${p.map((x) => (typeof x === "number" ? x.toFixed(3) : String(x))).join(", ")}${more ? ", …" : ""}]` : "";
    };
    v.update();
    return v;
  }

  function dataView(item) {
    const v = base(item, "mmsp-data");
    const line = h(doc, "div", "mmsp-meta");
    v.el.appendChild(line);
    v.update = () => {
      const it = v.item;
      setStatusAttr(v);
      const kind = it.kind === "data" || it.kind === "inline_data" || !it.kind ? "data" : String(it.kind);
      line.textContent = [kind, it.mime_type || "", typeof it.bytes === "number" ? fmtBytes(it.bytes) : ""]
        .filter(Boolean)
        .join(" · ") + (it.status === "streaming" ? "…" : "");
    };
    v.update();
    return v;
  }

  // ------------------------------------------------------------------ status and footer
  function drawStatus() {
    const s = turn.status;
    statusEl.textContent = "";
    statusEl.className = "mmsp-status";
    root.setAttribute("data-status", s || "");
    if (s === "streaming") {
      const ind = h(doc, "span", "mmsp-streaming");
      ind.appendChild(h(doc, "span", "mmsp-dot", { "aria-hidden": "true" }));
      ind.appendChild(h(doc, "span", "mmsp-streaming-label", null, "streaming…"));
      statusEl.appendChild(ind);
    } else if (s === "incomplete") {
      statusEl.classList.add("mmsp-banner", "mmsp-warn");
      statusEl.appendChild(h(doc, "strong", null, null, "Incomplete: "));
      statusEl.appendChild(h(doc, "span", null, null, turn.status_text || "the answer may be cut off"));
      const e = turn.error && typeof turn.error === "object" ? turn.error : null;
      if (e && (e.type || e.message)) {
        statusEl.appendChild(h(doc, "div", "mmsp-error-detail", null, [e.type, e.message].filter(Boolean).join(": ")));
      }
      if (e && e.hint) statusEl.appendChild(h(doc, "div", "mmsp-hint", null, e.hint));
    } else if (s === "error") {
      statusEl.classList.add("mmsp-banner", "mmsp-error");
      const e = turn.error && typeof turn.error === "object" ? turn.error : { message: str(turn.error) };
      statusEl.appendChild(h(doc, "strong", "mmsp-error-type", null, `${e.type || "Error"}: `));
      statusEl.appendChild(h(doc, "span", "mmsp-error-message", null, e.message || turn.status_text || ""));
      if (e.hint) statusEl.appendChild(h(doc, "div", "mmsp-hint", null, e.hint));
    } else if (s === "cancelled") {
      statusEl.classList.add("mmsp-banner", "mmsp-muted");
      // Python's status_text for a cancelled turn already reads "cancelled — …": do not say it twice
      const st = turn.status_text || "";
      statusEl.appendChild(h(doc, "span", null, null, !st ? "cancelled — partial output kept" : /^cancelled\b/i.test(st) ? st : `cancelled — ${st}`));
    } else if (turn.status_text) {
      statusEl.classList.add("mmsp-banner", "mmsp-muted");
      statusEl.appendChild(h(doc, "span", null, null, turn.status_text));
    }
    statusEl.hidden = !statusEl.firstChild;
  }

  function drawFooter() {
    const f = turn.footer;
    footerEl.textContent = "";
    footerEl.hidden = !f;
    if (!f || typeof f !== "object") return;
    const add = (cls, text, title) => {
      if (!text) return;
      footerEl.appendChild(h(doc, "span", `mmsp-stat ${cls || ""}`.trim(), title ? { title } : null, text));
    };
    const u = f.usage || {};
    const buckets = [
      ["cached", u.cached_tokens],
      ["prompt", u.prompt_tokens],
      ["thoughts", u.thoughts_tokens],
      ["response", u.response_tokens],
    ].filter(([, n]) => typeof n === "number");
    if (buckets.length) {
      add("mmsp-tokens", `tokens ${buckets.map(([k, n]) => `${k} ${fmtInt(n)}`).join(" · ")}`, "token usage per bucket");
    }
    const fr = f.finish_reason;
    if (fr === "length") add("mmsp-truncated", "⚠ truncated (length)", "the model stopped at its output token limit");
    else if (fr === "tool_call" || fr === "tool_calls") add("mmsp-finish", "finish: tool call");
    else if (fr) add("mmsp-finish", `finish: ${fr}`);
    if (typeof f.ttft === "number") add("", `TTFT ${fmtSeconds(f.ttft)}`, "time to first token");
    if (typeof f.total === "number") add("", `total ${fmtSeconds(f.total)}`, "total time");
    if (typeof f.tokens_per_second === "number") add("", `${f.tokens_per_second.toFixed(1)} tok/s`, "response tokens per second");
    if (f.cost_text) add("mmsp-cost", String(f.cost_text), "cost");
    if (typeof f.steps === "number" && f.steps > 1) add("", `${f.steps} steps`, "model calls in this turn");
  }

  // ------------------------------------------------------------------ events table
  function addEvent(row) {
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
    const ms = typeof row.ms === "number" ? row.ms.toFixed(1) : str(row.ms);
    for (const c of [str(row.n), ms, str(row.event_type), str(row.type), str(row.preview)]) tr.appendChild(h(doc, "td", null, null, c));
    eventsBody.appendChild(tr);
    eventRows++;
    if (eventRows > 5000) {
      eventsBody.firstChild.remove();
    }
    eventsCount.textContent = `(${fmtInt(eventRows)})`;
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
    root.removeEventListener("click", onClick);
    root.remove();
  }

  render(null);
  return { render, apply, flush, destroy, getText, viewModel, el: root, get status() { return turn.status; } };
}
