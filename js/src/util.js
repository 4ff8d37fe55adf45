// Small helpers shared by the renderer and the widgets. Nothing here touches innerHTML.

/** Create an element with classes, attributes and text (textContent only). */
export function h(doc, tag, cls, attrs, text) {
  const el = doc.createElement(tag);
  if (cls) el.className = cls;
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  if (text !== undefined && text !== null) el.textContent = String(text);
  return el;
}

/** A real <button type="button"> with a text label and an aria-label. */
export function button(doc, cls, label, ariaLabel, title) {
  const b = h(doc, "button", cls, { type: "button", "aria-label": ariaLabel || label, title: title || ariaLabel || label }, label);
  return b;
}

const IMAGE_SRC = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$/;
const AUDIO_SRC = /^data:audio\/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]*$/i;

/** Only raster images as base64 data URLs (no svg, no remote URLs, no javascript:). */
export function isSafeImageSrc(src) {
  return typeof src === "string" && IMAGE_SRC.test(src);
}

/** Only base64 data URLs of an audio MIME type. */
export function isSafeAudioSrc(src) {
  return typeof src === "string" && AUDIO_SRC.test(src);
}

export function str(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

/** Copy text to the clipboard: the async Clipboard API, else a hidden textarea + execCommand. */
export async function copyText(text, doc) {
  const d = doc || (typeof document !== "undefined" ? document : null);
  const win = d && d.defaultView;
  const nav = (win && win.navigator) || (typeof navigator !== "undefined" ? navigator : null);
  try {
    if (nav && nav.clipboard && typeof nav.clipboard.writeText === "function") {
      await nav.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the fallback (permissions, insecure context)
  }
  if (!d || !d.body) return false;
  // the textarea takes the focus to be selected: it goes back where it was (the Copy button), not
  // to the page, where the next keys would be the notebook's command-mode shortcuts ("d d" deletes)
  const had = d.activeElement;
  const ta = d.createElement("textarea");
  ta.value = text;
  ta.setAttribute("readonly", "");
  ta.style.position = "fixed";
  ta.style.top = "-1000px";
  ta.style.opacity = "0";
  d.body.appendChild(ta);
  let ok = false;
  try {
    ta.select();
    ok = typeof d.execCommand === "function" ? d.execCommand("copy") : false;
  } catch {
    ok = false;
  }
  ta.remove();
  if (had && had !== d.body && had.isConnected && typeof had.focus === "function") had.focus({ preventScroll: true });
  return ok;
}

/** Briefly show "Copied" (or "Copy failed") on a copy button. */
export function flashCopied(btn, ok) {
  const prev = btn.dataset.label || btn.textContent;
  btn.dataset.label = prev;
  btn.textContent = ok ? "Copied" : "Copy failed";
  btn.classList.toggle("mmsp-copied", !!ok);
  const win = btn.ownerDocument && btn.ownerDocument.defaultView;
  const st = (win && win.setTimeout) || setTimeout;
  st(() => {
    btn.textContent = btn.dataset.label || prev;
    btn.classList.remove("mmsp-copied");
  }, 1200);
}

/** Schedule a callback once per animation frame (or a short timer where there are no frames). */
export function frameScheduler(win) {
  if (win && typeof win.requestAnimationFrame === "function") {
    return { request: (fn) => win.requestAnimationFrame(fn), cancel: (id) => win.cancelAnimationFrame(id) };
  }
  const st = (win && win.setTimeout) || setTimeout;
  const ct = (win && win.clearTimeout) || clearTimeout;
  return { request: (fn) => st(fn, 0), cancel: (id) => ct(id) };
}

/** True when every field of `b` (recursively) is present in `a` with an equal value. */
export function covers(a, b) {
  if (b === null || typeof b !== "object") return a === b || (Number.isNaN(a) && Number.isNaN(b));
  if (a === null || typeof a !== "object") return false;
  if (Array.isArray(b)) {
    if (!Array.isArray(a) || a.length !== b.length) return false;
    for (let k = 0; k < b.length; k++) if (!covers(a[k], b[k])) return false;
    return true;
  }
  for (const k of Object.keys(b)) if (!covers(a[k], b[k])) return false;
  return true;
}

// JupyterLab and Notebook 7 bind Shift+Enter, Ctrl+Enter, Esc and single letters to notebook
// commands (run the cell — which wipes the widget's output —, command mode, insert, delete or
// retype cells). Pressed anywhere in a widget — its fields, and also its focused conversation, rows
// or buttons, where "d d" would delete the cell and "m" turn it into Markdown — they belong to the
// widget: Lumino's key bindings skip an element marked data-lm-suppress-shortcuts (set on the
// target just before they look, in the window's capture phase: the application listens on the
// document), and the event goes no further than the widget. The application's own shortcuts with
// Ctrl/Cmd (save, command palette, sidebar) still work.
const appShortcut = (e) =>
  (e.ctrlKey || e.metaKey) && !e.altKey && (/^[sb]$/i.test(e.key) || (e.shiftKey && /^c$/i.test(e.key)));

/** Keep key presses inside `root` away from the notebook's shortcuts (`listen` registers cleanups). */
export function keysStayIn(root, listen) {
  const win = root.ownerDocument.defaultView;
  const inside = (t) => !!t && t.nodeType === 1 && root.contains(t);
  listen(win, "keydown", (e) => {
    const t = e.target;
    if (!inside(t)) return;
    if (appShortcut(e)) t.removeAttribute("data-lm-suppress-shortcuts");
    else t.setAttribute("data-lm-suppress-shortcuts", "true");
  }, true);
  for (const type of ["keydown", "keyup", "keypress"]) {
    listen(root, type, (e) => {
      if (inside(e.target) && !appShortcut(e)) e.stopPropagation();
    });
  }
}

/**
 * One Tab stop for a list (a roving tabindex): the item holding it has tabindex=0, the others -1.
 * Focus entering an item (or something in it) gives that item the stop; ArrowDown / ArrowUp move the
 * focus and the stop to the next / previous item, Home / End to the first / last.
 *
 * Options: `items()` the items in order; `itemOf(node)` the item a focused node is in (null: none);
 * `keyItem(node)` the item whose arrow keys move the stop (default `itemOf`); `fallback(all)` the item
 * that takes the stop when the one holding it is gone (default the first); `onRove(all)` after the
 * stop was set; `onRefocus(item)` focus came back into the item already holding it; `holdEnds` an
 * arrow past either end is swallowed (else the key does what it does by default, e.g. scroll).
 * `listen(target, type, fn)` registers a listener (and its removal). Returns `rove(item?)`: give the
 * stop to `item` (default: keep it where it is, or the fallback when that item is gone).
 */
export function rovingTabStop(root, listen, options) {
  const { items, itemOf, keyItem = itemOf, fallback = (all) => all[0] || null, onRove, onRefocus, holdEnds } = options;
  let current = null;
  function rove(item) {
    const all = items();
    if (item) current = item;
    if (!all.includes(current)) current = fallback(all);
    for (const it of all) {
      const want = it === current ? "0" : "-1";
      if (it.getAttribute("tabindex") !== want) it.setAttribute("tabindex", want);
    }
    if (onRove) onRove(all);
  }
  listen(root, "focusin", (e) => {
    const it = itemOf(e.target);
    if (!it) return;
    if (it !== current) rove(it);
    else if (onRefocus) onRefocus(it);
  });
  listen(root, "keydown", (e) => {
    const it = keyItem(e.target);
    if (!it) return;
    const all = items();
    const k = all.indexOf(it);
    const to = { ArrowDown: k + 1, ArrowUp: k - 1, Home: 0, End: all.length - 1 }[e.key];
    if (to === undefined || (!all[to] && !holdEnds)) return;
    e.preventDefault();
    if (!all[to]) return;
    rove(all[to]);
    all[to].focus();
  });
  return rove;
}

/** A function that sends a message to the kernel through ``model`` and says whether it went: one
 *  whose kernel is gone (restarted: the comm refuses it) calls ``gone()`` instead of throwing out of
 *  the handler that sent it. */
export function sender(model, gone) {
  return (msg) => {
    try {
      model.send(msg);
      return true;
    } catch {
      gone();
      return false;
    }
  };
}
