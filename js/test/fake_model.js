// A fake anywidget model shared by the widget tests.

/** A fake anywidget model: get/set/on/off/send/save_changes, plus helpers to play Python. */
export function fakeModel(initial = {}) {
  const state = { ...initial };
  const handlers = new Map();
  const m = {
    sent: [],
    saved: 0,
    get: (k) => state[k],
    // as Backbone's set: a value that changes fires change:<name> (nothing goes to Python before save_changes)
    set: (k, v) => {
      const was = state[k];
      state[k] = v;
      if (was !== v) for (const fn of handlers.get(`change:${k}`) || []) fn();
    },
    save_changes() {
      m.saved++;
    },
    on(name, fn) {
      if (!handlers.has(name)) handlers.set(name, new Set());
      handlers.get(name).add(fn);
    },
    off(name, fn) {
      handlers.get(name)?.delete(fn);
    },
    send(msg) {
      m.sent.push(msg);
    },
    // Python side
    update(k, v) {
      state[k] = v;
      for (const fn of handlers.get(`change:${k}`) || []) fn();
    },
    custom(msg, buffers = []) {
      for (const fn of handlers.get("msg:custom") || []) fn(msg, buffers);
    },
    listeners: () => [...handlers.values()].reduce((n, s) => n + s.size, 0),
  };
  return m;
}
