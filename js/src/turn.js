// anywidget front end of TurnView: the live view of one %%mmsp turn.
import { createTurnView } from "./render.js";
import { covers } from "./util.js";
import { connectMath } from "./math.js";

function isTurn(t) {
  return !!t && typeof t === "object" && Object.keys(t).length > 0;
}

export function renderTurnWidget({ model, el }) {
  el.classList.add("mmsp-root", "mmsp-turn-widget");
  const view = createTurnView(el);
  const unmath = connectMath(model); // the kernel serves the math renderer, loaded on first use

  const draw = () => {
    const t = model.get("turn");
    if (!isTurn(t)) return;
    // The trait is set when the turn ends: skip the redraw when the live view already shows it.
    if (covers(view.viewModel(), t)) return;
    view.render(t);
  };
  const onMsg = (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "ops") view.apply(msg.ops);
    else if (msg.type === "snapshot" && isTurn(msg.turn)) view.render(msg.turn);
  };

  draw();
  model.on("msg:custom", onMsg);
  model.on("change:turn", draw);
  model.send({ type: "hello" });

  return () => {
    if (typeof model.off === "function") {
      model.off("msg:custom", onMsg);
      model.off("change:turn", draw);
    }
    unmath();
    view.destroy();
    el.classList.remove("mmsp-root", "mmsp-turn-widget");
  };
}

export default { render: renderTurnWidget };
