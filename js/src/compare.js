// anywidget front end of CompareView: several turns streaming side by side, one column per model.
// Python sends one message per repaint for all columns: {type: "ops", cols: [[i, ops], ...]}; a view
// that appears mid-stream says hello and gets {type: "snapshot", labels, turns}; the labels are also the
// synced trait `labels`, so the columns are drawn at once.
import { createTurnView } from "./render.js";
import { connectMath } from "./math.js";

export function renderCompareWidget({ model, el }) {
  const doc = el.ownerDocument; // the page the widget is drawn in (not always this bundle's global document)
  el.classList.add("mmsp-root", "mmsp-compare");
  const grid = doc.createElement("div");
  grid.className = "mmsp-columns";
  el.appendChild(grid);
  let views = [];
  const unmath = connectMath(model); // the kernel serves the math renderer, loaded on first use

  const setup = (labels) => {
    for (const view of views) view.destroy();
    grid.replaceChildren();
    views = labels.map((label) => {
      const column = doc.createElement("section");
      column.className = "mmsp-column";
      column.setAttribute("aria-label", String(label)); // a region named for its model
      const head = doc.createElement("div");
      head.className = "mmsp-column-head";
      head.dir = "auto"; // a model's name: its bidi controls reorder nothing outside it
      head.textContent = String(label);
      const body = doc.createElement("div");
      body.className = "mmsp-column-body";
      column.append(head, body);
      grid.appendChild(column);
      return createTurnView(body);
    });
  };

  const onMsg = (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "snapshot" && Array.isArray(msg.labels)) {
      setup(msg.labels);
      (Array.isArray(msg.turns) ? msg.turns : []).forEach((turn, i) => {
        if (turn && typeof turn === "object" && views[i]) views[i].render(turn);
      });
    } else if (msg.type === "ops" && Array.isArray(msg.cols)) {
      for (const entry of msg.cols) {
        if (!Array.isArray(entry)) continue;
        const [i, ops] = entry;
        if (Number.isInteger(i) && views[i] && Array.isArray(ops)) views[i].apply(ops);
      }
    }
  };

  // the columns exist from the start (their labels are a synced trait): ops that arrive while the
  // kernel is busy streaming, before any snapshot could answer a hello, have somewhere to go
  const labels = model.get("labels");
  if (Array.isArray(labels) && labels.length) setup(labels);
  model.on("msg:custom", onMsg);
  model.send({ type: "hello" });

  return () => {
    if (typeof model.off === "function") model.off("msg:custom", onMsg);
    unmath();
    for (const view of views) view.destroy();
    views = [];
    grid.remove();
    el.classList.remove("mmsp-root", "mmsp-compare");
  };
}

export default { render: renderCompareWidget };
