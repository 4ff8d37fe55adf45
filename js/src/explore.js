// anywidget front end of traces.explore(): a paged table of turns filtered and sorted in the kernel,
// the selected turn's conversation (each assistant turn drawn by render.js), its timing waterfall,
// and a replay of the selected message. Messages: see mmsp_notebook/traces/_explore.py.
//
// Every string is placed with textContent (model output only through render.js); every number comes
// formatted from Python. Only the page on screen is ever sent here.
import { createTurnView } from "./render.js";
import { connectMath } from "./math.js";
import { h, button, isSafeImageSrc, copyText, flashCopied, keysStayIn, rovingTabStop, frameScheduler, sender } from "./util.js";

const SPEEDS = ["1", "2", "5", "10", "inf"];
const NO_KERNEL = "This explorer is no longer connected to a kernel: run its cell again.";
const PAGE_SIZES = [10, 25, 50, 100];

function option(doc, value, label, selected) {
  const o = h(doc, "option", null, { value }, label);
  if (selected) o.selected = true;
  return o;
}

export function renderExplorer({ model, el }) {
  const doc = el.ownerDocument;
  el.classList.add("mmsp-root", "mmsp-explorer");

  // ------------------------------------------------------------------ layout
  const toolbar = h(doc, "div", "mmsp-x-toolbar");
  const search = h(doc, "input", "mmsp-input mmsp-x-search", {
    type: "search",
    placeholder: "search trace, model, error…  or latency>10 model:demo status=error",
    "aria-label": "Search turns",
  });
  const facets = {};
  const typed = {}; // each picker's field for a value it does not offer, shown by its last option
  for (const [key, label] of [["model", "model"], ["status", "status"], ["finish", "finish reason"]]) {
    facets[key] = h(doc, "select", "mmsp-select mmsp-x-facet", { "aria-label": `Filter by ${label}`, "data-facet": key });
    typed[key] = h(doc, "input", "mmsp-input mmsp-x-facet-type", { type: "text", placeholder: `${label}, as written`, "aria-label": `Type a ${label} to filter by`, "data-facet": key });
    typed[key].hidden = true;
  }
  const rangeCol = h(doc, "select", "mmsp-select mmsp-x-range-col", { "aria-label": "Range column" });
  const rangeLo = h(doc, "input", "mmsp-input mmsp-x-range-input", { type: "number", step: "any", placeholder: "min", "aria-label": "Range minimum" });
  const rangeHi = h(doc, "input", "mmsp-input mmsp-x-range-input", { type: "number", step: "any", placeholder: "max", "aria-label": "Range maximum" });
  const copyBtn = button(doc, "mmsp-btn mmsp-btn-small mmsp-x-copy", "Copy filter", "Copy the filter as pandas code");
  toolbar.append(search, facets.model, typed.model, facets.status, typed.status, facets.finish, typed.finish, rangeCol, rangeLo, rangeHi, copyBtn);
  const quickBar = h(doc, "div", "mmsp-x-quick", { role: "group", "aria-label": "Quick filters" });
  const summary = h(doc, "div", "mmsp-x-summary", { role: "status", "aria-live": "polite" });
  const tableWrap = h(doc, "div", "mmsp-x-table-wrap");
  const table = h(doc, "table", "mmsp-x-table");
  const thead = h(doc, "thead");
  const tbody = h(doc, "tbody");
  table.append(thead, tbody);
  tableWrap.appendChild(table);
  const pager = h(doc, "div", "mmsp-x-pager");
  const first = button(doc, "mmsp-btn mmsp-btn-small mmsp-x-first", "«", "First page");
  const prev = button(doc, "mmsp-btn mmsp-btn-small mmsp-x-prev", "‹", "Previous page");
  const pageLabel = h(doc, "span", "mmsp-meta mmsp-x-page");
  const next = button(doc, "mmsp-btn mmsp-btn-small mmsp-x-next", "›", "Next page");
  const last = button(doc, "mmsp-btn mmsp-btn-small mmsp-x-last", "»", "Last page");
  const sizeSel = h(doc, "select", "mmsp-select mmsp-x-size", { "aria-label": "Rows per page" });
  pager.append(first, prev, pageLabel, next, last, sizeSel);

  const detail = h(doc, "div", "mmsp-x-detail");
  const detailHead = h(doc, "div", "mmsp-x-detail-head");
  const title = h(doc, "span", "mmsp-x-detail-title", { dir: "auto" }, "Select a turn to read its conversation");
  const speedSel = h(doc, "select", "mmsp-select mmsp-x-speed", { "aria-label": "Replay speed" });
  for (const s of SPEEDS) speedSel.appendChild(option(doc, s, s === "inf" ? "at once" : `${s}×`, s === "1"));
  const replayBtn = button(doc, "mmsp-btn mmsp-btn-small mmsp-primary mmsp-x-replay", "Replay", "Replay this turn with its recorded timing");
  const stopBtn = button(doc, "mmsp-btn mmsp-btn-small mmsp-x-stop", "Stop", "Stop the replay");
  replayBtn.disabled = true;
  stopBtn.hidden = true;
  detailHead.append(title, speedSel, replayBtn, stopBtn);
  const replayArea = h(doc, "div", "mmsp-x-replay-area");
  replayArea.hidden = true;
  const wfEl = h(doc, "div", "mmsp-x-waterfall-slot");
  const conv = h(doc, "div", "mmsp-x-conversation mmsp-conversation", { tabindex: "0", role: "region", "aria-label": "Conversation" });
  detail.append(detailHead, replayArea, wfEl, conv);
  el.append(toolbar, quickBar, summary, tableWrap, pager, detail);

  // ------------------------------------------------------------------ state
  let page = null;
  let views = [];
  let replayView = null;
  let searchTimer = null;
  const cleanups = [];
  const listen = (target, name, fn, opts) => {
    target.addEventListener(name, fn, opts);
    cleanups.push(() => target.removeEventListener(name, fn, opts));
  };
  const win = doc.defaultView;
  keysStayIn(el, listen);

  // A message to the kernel; one whose kernel is gone (restarted) says so in the summary line,
  // instead of throwing out of the click (the explorer would only seem not to answer).
  const tell = sender(model, () => failed(NO_KERNEL));

  function query(patch) {
    summary.dataset.busy = "true";
    tell({ type: "query", patch });
  }

  // ------------------------------------------------------------------ controls
  listen(search, "input", () => {
    if (searchTimer !== null) win.clearTimeout(searchTimer);
    searchTimer = win.setTimeout(() => {
      searchTimer = null;
      query({ text: search.value, page: 0 });
    }, 250);
  });
  listen(search, "keydown", (e) => {
    if (e.key !== "Enter") return;
    if (searchTimer !== null) win.clearTimeout(searchTimer);
    searchTimer = null;
    query({ text: search.value, page: 0 });
  });
  for (const [key, sel] of Object.entries(facets)) {
    const field = typed[key];
    listen(sel, "change", () => {
      const opt = sel.options[sel.selectedIndex];
      if (opt && opt.dataset.type) {
        field.hidden = false;
        field.focus();
        return;
      }
      field.hidden = true;
      query({ [key]: sel.selectedIndex > 0 ? [sel.value] : [], page: 0 }); // (a value may be "")
    });
    listen(field, "keydown", (e) => {
      if (e.key === "Enter" && field.value !== "") {
        e.preventDefault();
        field.hidden = true;
        query({ [key]: [field.value], page: 0 });
        field.value = "";
        sel.focus();
      } else if (e.key === "Escape" || (e.key === "Enter" && field.value === "")) {
        e.preventDefault();
        field.hidden = true;
        field.value = "";
        if (page) fillFacet(key, page);
        sel.focus();
      }
    });
  }
  const sendRange = () => {
    const col = rangeCol.value;
    const ranges = {};
    if (col && (rangeLo.value !== "" || rangeHi.value !== "")) {
      ranges[col] = [rangeLo.value === "" ? null : Number(rangeLo.value), rangeHi.value === "" ? null : Number(rangeHi.value)];
    }
    query({ ranges, page: 0 });
  };
  listen(rangeCol, "change", sendRange);
  listen(rangeLo, "change", sendRange);
  listen(rangeHi, "change", sendRange);
  const copyCode = (code) =>
    Promise.resolve(copyText(code, doc)).then(
      (ok) => flashCopied(copyBtn, ok !== false),
      () => flashCopied(copyBtn, false),
    );
  let codeAsked = false; // a code too long to come with every page, asked of the kernel
  listen(copyBtn, "click", () => {
    if (page && typeof page.code !== "string") {
      codeAsked = true;
      tell({ type: "code" });
      return;
    }
    copyCode(page ? page.code : "turns");
  });
  const goto = (n) => page && query({ page: n });
  listen(first, "click", () => goto(0));
  listen(prev, "click", () => page && goto(page.query.page - 1));
  listen(next, "click", () => page && goto(page.query.page + 1));
  listen(last, "click", () => page && goto(page.pages - 1));
  for (const n of PAGE_SIZES) sizeSel.appendChild(option(doc, String(n), `${n} rows`, n === 25));
  listen(sizeSel, "change", () => query({ page_size: Number(sizeSel.value), page: 0 }));
  listen(replayBtn, "click", () => {
    if (replayBtn.disabled) return;
    tell({ type: "replay", speed: speedSel.value === "inf" ? 1e9 : Number(speedSel.value) });
  });
  listen(stopBtn, "click", () => tell({ type: "stop" }));

  // rows: one Tab stop (the row last focused, else the selected or first); click or Enter selects, arrows,
  // Home and End move
  const selectRow = (tr) => {
    if (!tr || !tr.dataset.row) return;
    for (const other of tbody.querySelectorAll("tr[aria-selected='true']")) other.setAttribute("aria-selected", "false");
    tr.setAttribute("aria-selected", "true");
    tell({ type: "select", row: Number(tr.dataset.row) });
  };
  listen(tbody, "click", (e) => selectRow(e.target.closest ? e.target.closest("tr") : null));
  const roveRows = rovingTabStop(tbody, listen, {
    items: () => [...tbody.children],
    itemOf: (t) => (t.closest ? t.closest("tr") : null),
    holdEnds: true,
  });
  listen(tbody, "keydown", (e) => {
    const tr = e.target.closest ? e.target.closest("tr") : null;
    if (!tr || (e.key !== "Enter" && e.key !== " ")) return;
    e.preventDefault();
    selectRow(tr);
  });

  // ------------------------------------------------------------------ drawing the page
  // a picker: "all", the values the kernel offers (a long one's title says more of it), then "type a value…"
  const ALL = { model: "all models", status: "any status", finish: "any finish" };
  function fillFacet(key, p) {
    const sel = facets[key];
    const value = ((p.query && p.query[key]) || [])[0];
    sel.replaceChildren(option(doc, "", ALL[key], value === undefined));
    for (const [v, label, tip] of (p.facets && p.facets[key]) || []) {
      const o = option(doc, v, label, v === value);
      if (tip) o.title = tip;
      sel.appendChild(o);
    }
    const other = option(doc, "", (p.facet_other && p.facet_other[key]) || "type a value…", false);
    other.dataset.type = "true";
    sel.appendChild(other);
  }

  function drawHead(columns, q) {
    const tr = h(doc, "tr");
    for (const [key, label, numeric] of columns) {
      const sorted = q.sort === key;
      const th = h(doc, "th", numeric ? "mmsp-x-num" : null, {
        scope: "col",
        "aria-sort": sorted ? (q.desc ? "descending" : "ascending") : "none",
      });
      const b = h(doc, "button", "mmsp-x-sort", { type: "button", "data-col": key, title: `Sort by ${label}` }, label + (sorted ? (q.desc ? " ▼" : " ▲") : ""));
      b.addEventListener("click", () => query({ sort: key, desc: sorted ? !q.desc : !!numeric, page: 0 }));
      th.appendChild(b);
      tr.appendChild(th);
    }
    thead.replaceChildren(tr);
  }

  // a redrawn sort header, quick filter or row that had the focus gives it to its new self (else to a row
  // or the search box): the next keys pressed stay in the explorer
  const focusKey = (n) => ["quick", "col", "row"].map((k) => (n.dataset && k in n.dataset ? k + n.dataset[k] : "")).join("");

  function drawPage(p) {
    const had = el.contains(doc.activeElement) ? focusKey(doc.activeElement) : "";
    page = p;
    delete summary.dataset.busy;
    const q = p.query;
    if (doc.activeElement !== search && search.value !== q.text) search.value = q.text;
    for (const key of Object.keys(facets)) if (doc.activeElement !== typed[key]) fillFacet(key, p);
    const rangeKey = Object.keys(q.ranges || {})[0] || rangeCol.value || (p.ranges || [])[0] || "";
    rangeCol.replaceChildren(...(p.ranges || []).map((c) => option(doc, c, c, c === rangeKey)));
    quickBar.replaceChildren();
    for (const [name, label] of p.quick) {
      const on = (q.quick || []).includes(name);
      const b = button(doc, "mmsp-btn mmsp-btn-small mmsp-x-chip", label, `Quick filter: ${label}`);
      b.dataset.quick = name;
      b.setAttribute("aria-pressed", on ? "true" : "false");
      b.addEventListener("click", () => {
        const now = (page.query.quick || []).filter((x) => x !== name);
        if (!on) now.push(name);
        query({ quick: now, page: 0 });
      });
      quickBar.appendChild(b);
    }
    summary.textContent = p.summary;
    summary.classList.remove("mmsp-error");
    drawHead(p.columns, q);
    const rows = [];
    for (const [pos, status, finish, cells] of p.rows) {
      const tr = h(doc, "tr", null, { tabindex: "-1", "data-row": pos, "data-status": status, "data-finish": finish, "aria-selected": pos === p.selected ? "true" : "false" });
      cells.forEach((text, k) => {
        const numeric = p.columns[k] && p.columns[k][2];
        const cls = p.columns[k] && p.columns[k][0] === "error" && text ? "mmsp-x-error" : numeric ? "mmsp-x-num" : null;
        tr.appendChild(h(doc, "td", cls, { title: text.length > 40 ? text : null, dir: "auto" }, text));
      });
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    roveRows(rows.find((r) => r.getAttribute("aria-selected") === "true") || rows[0]);
    pageLabel.textContent = p.page_label;
    first.disabled = prev.disabled = q.page <= 0;
    next.disabled = last.disabled = q.page >= p.pages - 1;
    sizeSel.value = String(q.page_size);
    if (had && !el.contains(doc.activeElement)) {
      const again = [...el.querySelectorAll("[data-quick],[data-col],[data-row]")].find((n) => focusKey(n) === had);
      (again || tbody.querySelector("tr") || search).focus();
    }
  }

  // ------------------------------------------------------------------ drawing the detail
  function destroyViews() {
    for (const v of views) v.destroy();
    views = [];
  }

  function drawWaterfall(wf) {
    wfEl.replaceChildren();
    if (!wf) {
      wfEl.appendChild(h(doc, "div", "mmsp-x-waterfall mmsp-x-empty", null, "no timing sidecar for this response: mmsp's Tracer records no timing"));
      return;
    }
    const box = h(doc, "div", "mmsp-x-waterfall", { "data-status": wf.status || "" });
    const head = h(doc, "div", "mmsp-x-wf-head", null, "timing ");
    head.appendChild(h(doc, "span", "mmsp-meta", null, wf.summary || ""));
    box.appendChild(head);
    for (const b of wf.bars || []) {
      const kind = /^[a-z_]+$/.test(b.kind) ? b.kind : "data";
      const row = h(doc, "div", `mmsp-x-wf-row mmsp-x-wf-${kind}${b.selected ? " mmsp-x-wf-selected" : ""}`);
      const track = h(doc, "span", "mmsp-x-wf-track");
      const bar = h(doc, "span", "mmsp-x-wf-bar", { title: b.text });
      bar.style.left = `${Number(b.left) || 0}%`;
      bar.style.width = `${Number(b.width) || 0}%`;
      track.appendChild(bar);
      row.append(h(doc, "span", "mmsp-x-wf-label", { dir: "auto" }, b.label), track, h(doc, "span", "mmsp-x-wf-time", null, b.text));
      box.appendChild(row);
    }
    const axis = h(doc, "div", "mmsp-x-wf-row mmsp-x-wf-axis");
    const track = h(doc, "span", "mmsp-x-wf-track");
    for (const t of wf.ticks || []) {
      const tick = h(doc, "span", "mmsp-x-wf-tick", null, t.text);
      tick.style.left = `${Number(t.left) || 0}%`;
      track.appendChild(tick);
    }
    axis.append(h(doc, "span", "mmsp-x-wf-label"), track, h(doc, "span", "mmsp-x-wf-time"));
    box.appendChild(axis);
    wfEl.appendChild(box);
  }

  // An entry is drawn whole, or (a turn of many steps) the steps the kernel sent so far: more of them
  // and the entries around come with "more" answers as the reader scrolls (see _detail.py).
  function drawEntry(entry, selected) {
    const kind = ["user", "assistant", "failed", "sidecar", "damaged"].includes(entry.kind) ? entry.kind : "damaged";
    const sec = h(doc, "section", `mmsp-conv-msg mmsp-conv-${kind}${entry.key === selected ? " mmsp-conv-selected" : ""}`, { "data-key": entry.key });
    sec.appendChild(h(doc, "div", "mmsp-conv-head", { dir: "auto" }, entry.label || ""));
    const part = { sec, entry, view: null, body: null, lines: null };
    if (kind === "user") {
      if (entry.text) sec.appendChild(h(doc, "div", "mmsp-conv-user-text", null, entry.text));
      for (const img of entry.images || []) {
        if (img && isSafeImageSrc(img.src)) sec.appendChild(h(doc, "img", "mmsp-conv-image", { src: img.src, alt: img.alt || "image", loading: "lazy" }));
        else sec.appendChild(h(doc, "div", "mmsp-meta", null, (img && img.note) || "image not shown"));
      }
    } else if (kind === "assistant" || kind === "failed" || kind === "sidecar") {
      part.body = h(doc, "div", "mmsp-conv-body");
      sec.appendChild(part.body);
      part.view = createTurnView(part.body);
      part.view.render(entry.vm || {});
      views.push(part.view);
      part.lines = h(doc, "div", "mmsp-conv-lines");
      for (const line of entry.lines || []) part.lines.appendChild(h(doc, "div", "mmsp-conv-timing mmsp-meta", null, line));
      sec.appendChild(part.lines);
      if (entry.note) sec.appendChild(h(doc, "div", "mmsp-conv-note mmsp-meta", null, entry.note));
    } else {
      sec.appendChild(h(doc, "div", "mmsp-conv-note mmsp-conv-damaged-text", null, entry.text || ""));
    }
    for (const note of entry.notes || []) sec.appendChild(h(doc, "div", "mmsp-conv-note mmsp-meta", null, note));
    return part;
  }

  // the detail on screen: its row, the window [lo, hi) of blocks drawn out of `blocks`, the parts drawn in order
  let shown = null;
  const stepsOf = (part) => (part && part.entry && Array.isArray(part.entry.steps) ? part.entry.steps : null);

  function askMore(dir) {
    if (!shown || shown.pending) return;
    if (dir === "before" ? shown.lo <= 0 : shown.hi >= shown.blocks) return;
    shown.pending = dir;
    // unavailable until the answer, yet focusable: a disabled button would drop the focus to the page
    for (const b of conv.querySelectorAll(".mmsp-x-more")) b.setAttribute("aria-disabled", "true");
    tell({ type: "more", row: shown.row, [dir]: dir === "before" ? shown.lo : shown.hi });
  }

  // "show earlier" / "show later" beside the blocks drawn (in a turn whose steps are cut, inside it)
  function drawMoreButtons() {
    // a button that had the focus gives it to its new self (else to the conversation): the next keys
    // pressed stay in the explorer
    const had = doc.activeElement;
    const refocus = had && conv.contains(had) && had.classList.contains("mmsp-x-more") ? had.dataset.more : null;
    for (const b of conv.querySelectorAll(".mmsp-x-more")) b.remove();
    placeMoreButtons();
    if (refocus && !conv.contains(doc.activeElement)) {
      (conv.querySelector(`.mmsp-x-more-${refocus}`) || conv).focus({ preventScroll: true });
    }
  }
  function placeMoreButtons() {
    const loaded = shown.parts;
    if (!loaded.length) return;
    const make = (dir, n) => {
      const b = button(doc, `mmsp-btn mmsp-btn-small mmsp-x-more mmsp-x-more-${dir}`, `${dir === "before" ? "↑ Show earlier" : "↓ Show later"} (${n} more)`,
        dir === "before" ? "Show the earlier part of the conversation" : "Show the later part of the conversation");
      b.dataset.more = dir;
      b.addEventListener("click", () => askMore(dir));
      return b;
    };
    const first = loaded[0];
    const last = loaded[loaded.length - 1];
    if (shown.lo > 0) {
      const b = make("before", shown.lo);
      const st = stepsOf(first);
      if (st && st[0] > 0) first.sec.insertBefore(b, first.body);
      else conv.insertBefore(b, first.sec);
    }
    if (shown.hi < shown.blocks) {
      const b = make("after", shown.blocks - shown.hi);
      const st = stepsOf(last);
      if (st && st[1] < st[2]) last.sec.insertBefore(b, last.lines);
      else conv.insertBefore(b, last.sec.nextSibling);
    }
    watchEdges();
  }

  // scrolling near an edge of what is drawn, or past it (a jump to either end), asks for the next blocks
  const edges = frameScheduler(win);
  let edgeFrame = null;
  function watchEdges() {
    if (edgeFrame !== null) return;
    edgeFrame = edges.request(() => {
      edgeFrame = null;
      if (!shown || shown.pending || !conv.clientHeight) return; // (nothing laid out: the buttons ask)
      const box = conv.getBoundingClientRect();
      for (const b of conv.querySelectorAll(".mmsp-x-more")) {
        const r = b.getBoundingClientRect();
        if (b.dataset.more === "after" ? r.top < box.bottom + 200 : r.bottom > box.top - 200) {
          askMore(b.dataset.more);
          return;
        }
      }
    });
  }
  listen(conv, "scroll", watchEdges);

  // a part of the answer: the steps of the turn at the edge drawn (merged into it), or an entry beside it
  function mergeSteps(part, entry) {
    const had = part.entry.steps;
    const vm = part.entry.vm || { items: [] };
    const known = new Set((vm.items || []).map((it) => it.i));
    const added = ((entry.vm && entry.vm.items) || []).filter((it) => !known.has(it.i));
    vm.items = [...(vm.items || []), ...added];
    part.view.apply(added.map((it) => ["item", it.i, it]));
    const lines = (entry.lines || []).map((line) => h(doc, "div", "mmsp-conv-timing mmsp-meta", null, line));
    if (entry.steps[0] < had[0]) part.lines.prepend(...lines);
    else part.lines.append(...lines);
    part.entry.steps = [Math.min(had[0], entry.steps[0]), Math.max(had[1], entry.steps[1]), had[2]];
  }

  function onMore(m) {
    if (!shown || m.row !== shown.row || !Array.isArray(m.window) || !shown.parts.length) return;
    shown.pending = null;
    const [lo, hi] = m.window;
    const before = lo < shown.lo;
    // blocks drawn above what the reader sees leave it where it is (those drawn below come into view;
    // the browser's own scroll anchoring is off in explore.css: it could anchor on a button removed here)
    const keep = conv.querySelector(before ? ".mmsp-x-more-before" : ".mmsp-x-more-after");
    const above = keep && keep.getBoundingClientRect().bottom <= conv.getBoundingClientRect().top;
    const anchor = keep && (before || above) ? keep.nextElementSibling : null;
    const top = anchor ? anchor.getBoundingClientRect().top : 0;
    const entries = (m.entries || []).slice();
    if (before) entries.reverse();
    for (const entry of entries) {
      const edge = before ? shown.parts[0] : shown.parts[shown.parts.length - 1];
      if (edge.entry.key === entry.key) {
        if (stepsOf(edge) && Array.isArray(entry.steps) && edge.view) mergeSteps(edge, entry);
        continue;
      }
      const part = drawEntry(entry, shown.selected);
      if (before) {
        conv.insertBefore(part.sec, edge.sec);
        shown.parts.unshift(part);
      } else {
        conv.insertBefore(part.sec, edge.sec.nextSibling);
        shown.parts.push(part);
      }
    }
    shown.lo = Math.min(shown.lo, lo);
    shown.hi = Math.max(shown.hi, hi);
    drawMoreButtons();
    if (anchor && anchor.isConnected) conv.scrollTop += anchor.getBoundingClientRect().top - top;
  }

  function drawDetail(d) {
    destroyViews();
    shown = null;
    conv.replaceChildren();
    if (!d || d.row === null || d.row === undefined) {
      title.textContent = "Select a turn to read its conversation";
      replayBtn.disabled = true;
      wfEl.replaceChildren();
      return;
    }
    title.textContent = d.title || "";
    if (d.error) {
      replayBtn.disabled = true;
      wfEl.replaceChildren();
      conv.appendChild(h(doc, "div", "mmsp-conv-note mmsp-conv-damaged-text", null, d.error));
      return;
    }
    replayBtn.disabled = !d.replayable;
    replayBtn.title = d.replayable ? "Replay this turn with its recorded timing" : "This response was never recorded: nothing to replay";
    drawWaterfall(d.waterfall);
    if (d.source) conv.appendChild(h(doc, "div", "mmsp-conv-title mmsp-meta", null, d.source));
    for (const note of d.notes || []) conv.appendChild(h(doc, "div", "mmsp-conv-note mmsp-meta", null, note));
    // the conversation's extent, and the window of its blocks sent (an older kernel sends it whole)
    if (d.outline) conv.appendChild(h(doc, "div", "mmsp-x-outline mmsp-meta", null, d.outline));
    const win0 = Array.isArray(d.window) ? d.window : [0, 0];
    shown = { row: d.row, selected: d.selected, lo: win0[0], hi: win0[1], blocks: Number(d.blocks) || win0[1], parts: [], pending: null };
    for (const entry of d.entries || []) {
      const part = drawEntry(entry, d.selected);
      shown.parts.push(part);
      conv.appendChild(part.sec);
    }
    drawMoreButtons();
    const chosen = shown.parts.find((p) => p.entry.key === d.selected);
    let target = chosen ? chosen.sec : null;
    const st = stepsOf(chosen);
    if (st && d.selected_step > st[0] && chosen.body) {
      // a step inside a long turn: its first item
      const items = (chosen.entry.vm.items || []).slice().sort((a, b) => a.i - b.i);
      const at = items.findIndex((it) => it.step === d.selected_step);
      const el = at >= 0 ? chosen.body.querySelector(".mmsp-items") : null;
      if (el && el.children[at]) target = el.children[at];
    }
    if (target) conv.scrollTop = Math.max(0, target.getBoundingClientRect().top - conv.getBoundingClientRect().top + conv.scrollTop - 8);
  }

  function onReplay(msg) {
    if (msg.phase === "start") {
      if (replayView) replayView.destroy();
      replayArea.replaceChildren(h(doc, "div", "mmsp-conv-head", null, msg.title || "replay"));
      const body = h(doc, "div", "mmsp-conv-body");
      replayArea.appendChild(body);
      replayArea.hidden = false;
      replayView = createTurnView(body);
      replayView.render({ status: "streaming", items: [] });
      stopBtn.hidden = false;
    } else if (msg.phase === "ops" && replayView) {
      replayView.apply(msg.ops);
    } else if (msg.phase === "end" && replayView) {
      replayView.render(msg.vm || {});
      const had = doc.activeElement === stopBtn;
      stopBtn.hidden = true;
      if (had) (replayBtn.disabled ? speedSel : replayBtn).focus(); // (Stop is gone: not to the page)
    }
  }

  const onMsg = (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "state") {
      if (msg.page) drawPage(msg.page);
      drawDetail(msg.detail);
    } else if (msg.type === "page") drawPage(msg);
    else if (msg.type === "detail") drawDetail(msg);
    else if (msg.type === "more") onMore(msg);
    else if (msg.type === "replay") onReplay(msg);
    else if (msg.type === "code") {
      if (codeAsked && typeof msg.code === "string") copyCode(msg.code);
      codeAsked = false;
    } else if (msg.type === "error") failed(String(msg.error || "error"));
  };
  function failed(text) {
    codeAsked = false;
    if (shown && shown.pending) {
      shown.pending = null; // a "more" refused: its buttons ask again
      for (const b of conv.querySelectorAll(".mmsp-x-more")) b.removeAttribute("aria-disabled");
    }
    delete summary.dataset.busy;
    summary.textContent = text;
    summary.classList.add("mmsp-error");
  }
  model.on("msg:custom", onMsg);
  const unmath = connectMath(model); // the kernel serves the math renderer, loaded on first use
  tell({ type: "hello" });

  return () => {
    if (typeof model.off === "function") model.off("msg:custom", onMsg);
    unmath();
    if (searchTimer !== null) win.clearTimeout(searchTimer);
    for (const undo of cleanups) undo();
    destroyViews();
    if (edgeFrame !== null) edges.cancel(edgeFrame);
    if (replayView) replayView.destroy();
    el.replaceChildren();
    el.classList.remove("mmsp-root", "mmsp-explorer");
  };
}

export default { render: renderExplorer };
