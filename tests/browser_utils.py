"""A Jupyter server and headless Debian Chromium for the browser tests (tests/test_browser.py).

The server is isolated from the machine it runs on: its own root, config, data and runtime
directories, MMSP_CACHE_DIR in the temporary directory, and no network calls (news, update checks
and the PyPI extension manager are off, terminals and jupyter_lsp are not loaded). Nor does each
page load ask the server whether JupyterLab needs a rebuild (``buildCheck``: seconds of the server's
CPU a page, for a dialog these tests never see, the extensions being installed as packages).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mmsp_notebook.views.html import COPY_SCRIPT

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
]

# settings that would otherwise ask about (or fetch) Jupyter news on first start
_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}
# page_config.json: no rebuild check on each page load (see the docstring above)
_PAGE_CONFIG = {"buildCheck": False, "buildAvailable": False}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    """``jupyter lab`` (which also serves Notebook 7's ``/tree`` and ``/notebooks``) on a free port."""

    def __init__(self, base: Path, env: dict[str, str] | None = None) -> None:
        self.base = base
        self.root = base / "nb"
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.extra_env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base / "jupyter.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_settings(self) -> None:
        settings = self.base / "config" / "lab" / "user-settings"
        shutil.rmtree(settings, ignore_errors=True)
        for rel, value in _SETTINGS.items():
            path = settings / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))

    def start(self, timeout: float = 60.0) -> JupyterServer:
        for d in ("nb", "config", "data", "runtime", "cache"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        self._write_settings()
        labconfig = self.base / "config" / "labconfig"
        labconfig.mkdir(parents=True, exist_ok=True)
        (labconfig / "page_config.json").write_text(json.dumps(_PAGE_CONFIG))
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(self.base / "config"),
            JUPYTER_DATA_DIR=str(self.base / "data"),
            JUPYTER_RUNTIME_DIR=str(self.base / "runtime"),
            JUPYTER_PLATFORM_DIRS="1",
            MMSP_CACHE_DIR=str(self.base / "cache"),
            PYTHONUNBUFFERED="1",
        )
        env.pop("JPY_SESSION_NAME", None)
        env.update(self.extra_env)
        if os.environ.get("MMSP_BENCH_KERNEL_PATH"):  # measure another checkout's package (before/after figures)
            env["PYTHONPATH"] = os.environ["MMSP_BENCH_KERNEL_PATH"]
        cmd = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.terminals_enabled=False",
            '--ServerApp.jpserver_extensions={"jupyter_lsp": False}',
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.base)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status", timeout=2)
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"jupyter lab did not answer /api/status in {timeout} s:\n{self.log_tail()}") from None
                time.sleep(0.2)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"token {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def page_url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.url}{path}{sep}token={self.token}"

    def write_notebook(self, name: str, *sources: str) -> str:
        import nbformat

        nb = nbformat.v4.new_notebook()
        # a kernelspec, or JupyterLab asks for a kernel in a dialog that blocks the page
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
        nbformat.write(nb, str(self.root / name))
        return name

    def shutdown_kernels(self) -> None:
        """Shut every session's kernel down (between tests: two cores, keep them free)."""
        try:
            for s in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{s['id']}")
            for k in self.api("GET", "/api/kernels"):
                self.api("DELETE", f"/api/kernels/{k['id']}")
        except (urllib.error.URLError, OSError):
            pass

    def reset(self) -> None:
        """Back to what a server just started holds: no kernel, no workspace, nothing in its root or
        its MMSP_CACHE_DIR (no notebook, no trace), only the settings :meth:`start` writes."""
        self.shutdown_kernels()
        for name in self.api("GET", "/lab/api/workspaces")["workspaces"]["ids"]:
            self.api("DELETE", f"/lab/api/workspaces/{name}")
        for d in ("nb", "cache"):
            shutil.rmtree(self.base / d)
            (self.base / d).mkdir()
        self._write_settings()

    def stop(self) -> None:
        if self.proc is None:
            return
        self.shutdown_kernels()
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None


class Shared:
    """One Chromium and one ``jupyter lab`` server for all the browser test modules of a run (each
    takes seconds to start on two cores): started by the first test that asks for them, the server
    :meth:`JupyterServer.reset` for each module (so that each module starts on what a new server
    holds), both stopped by tests/conftest.py after the last browser test of a row."""

    def __init__(self) -> None:
        self._playwright: Any = None
        self._browser: Any = None
        self._server: JupyterServer | None = None

    def browser(self, sync_playwright: Any, executable: str) -> Any:
        if self._browser is None or not self._browser.is_connected():
            if self._playwright is None:
                self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        return self._browser

    def server(self, new: Callable[[], JupyterServer]) -> JupyterServer:
        """The running server, reset; or ``new()``, started (also when the last one exited)."""
        if self._server is not None and self._server.proc is not None and self._server.proc.poll() is None:
            self._server.reset()
            return self._server
        if self._server is not None:
            self._server.stop()
        self._server = new().start()
        return self._server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None


SHARED = Shared()


# --------------------------------------------------------------------------- page helpers
# Records what the live views (the TurnView widgets, ``.mmsp-turn``; not the static HTML that replaces
# them, which has the same classes plus ``.mmsp-static``) showed: ``__seen[k]`` is when
# ``k`` first showed in a turn that was still streaming (``live:k`` in any state, as the last ops
# batch of a turn also ends it), ``__live`` the longest text each area showed. Installed before the
# page loads; ``window.__recorderOff = true`` stops it (where it would add to what is measured).
STREAM_RECORDER = r"""
(() => {
  window.__seen = {};
  window.__live = {thinking: '', text: '', args: '', output: '', names: []};
  const mark = (k) => { if (!window.__seen[k]) window.__seen[k] = performance.now(); };
  const keep = (k, s) => { if (s.length > window.__live[k].length) window.__live[k] = s; };
  const look = () => {
    if (window.__recorderOff) return;
    for (const t of document.querySelectorAll('.mmsp-turn:not(.mmsp-static)')) {
      const streaming = t.getAttribute('data-status') === 'streaming';
      const both = (k) => { mark('live:' + k); if (streaming) mark(k); };
      if (t.querySelector('.mmsp-status .mmsp-streaming')) both('indicator');
      for (const th of t.querySelectorAll('.mmsp-thinking .mmsp-thinking-body'))
        if (th.textContent.trim()) { both('thinking'); keep('thinking', th.textContent); }
      for (const x of t.querySelectorAll('.mmsp-text')) if (x.textContent.trim()) { both('text'); keep('text', x.textContent); }
      for (const n of t.querySelectorAll('.mmsp-tool .mmsp-tool-name')) if (n.textContent) {
        both('tool:' + n.textContent);
        if (!window.__live.names.includes(n.textContent)) window.__live.names.push(n.textContent);
      }
      for (const a of t.querySelectorAll('.mmsp-tool .mmsp-tool-args')) keep('args', a.textContent);
      for (const o of t.querySelectorAll('.mmsp-tool .mmsp-tool-output')) if (o.textContent) { both('tool_result'); keep('output', o.textContent); }
      if (t.querySelector('.mmsp-image img.mmsp-img')) both('image');
      if (t.querySelector('.mmsp-footer .mmsp-tokens')) both('footer');
    }
  };
  let queued = false;
  const start = () => new MutationObserver(() => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => { queued = false; look(); });
  }).observe(document.documentElement, {subtree: true, childList: true, characterData: true, attributes: true,
                                         attributeFilter: ['data-status', 'src']});
  if (document.documentElement) start(); else document.addEventListener('DOMContentLoaded', start);
})();
"""

# Any alert/confirm/prompt, and any script, on* attribute or javascript: URL that reaches an output
# area (checked on every node added to the page, so also the live views' intermediate states).
XSS_TRAP = r"""
(() => {
  window.__copyScript = COPY_SCRIPT_TEXT;  // the static view's own copy script, the one script it may hold
  window.__xss = [];
  window.__xssNodes = [];
  for (const name of ['alert', 'confirm', 'prompt']) {
    const orig = window[name];
    window[name] = function (...args) { window.__xss.push(name + ':' + String(args[0])); return orig.apply(this, args); };
  }
  const bad = (el) => {
    if (el.nodeType !== 1 || !el.closest('.jp-OutputArea-output')) return;
    for (const e of [el, ...el.querySelectorAll('*')]) {
      if (e.tagName === 'SCRIPT' && e.textContent !== window.__copyScript) window.__xssNodes.push('script: ' + e.textContent.slice(0, 60));
      for (const a of e.attributes) {
        if (/^on/i.test(a.name)) window.__xssNodes.push(e.tagName + ' ' + a.name + '=' + a.value);
        if (/^(href|src|action|formaction|xlink:href)$/i.test(a.name) && /^\s*javascript:/i.test(a.value))
          window.__xssNodes.push(e.tagName + ' ' + a.name + '=' + a.value);
      }
    }
  };
  const start = () => new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'attributes') bad(r.target);
      else for (const n of r.addedNodes) bad(n);
    }
  }).observe(document.documentElement, {subtree: true, childList: true, attributes: true});
  if (document.documentElement) start(); else document.addEventListener('DOMContentLoaded', start);
})();
"""
XSS_TRAP = XSS_TRAP.replace("COPY_SCRIPT_TEXT", json.dumps(re.sub(r"^<script[^>]*>|</script>$", "", COPY_SCRIPT)))


LONGTASK_OBSERVER = r"""
() => {
  window.__longtasks = [];
  window.__longtaskObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__longtasks.push(
      {name: e.name, start: Math.round(e.startTime), duration: Math.round(e.duration),
       attribution: (e.attribution || []).map((a) => a.containerType + ':' + (a.containerSrc || a.containerName || ''))});
  });
  window.__longtaskObserver.observe({type: 'longtask'});
  window.__observeFrom = performance.now();
  return PerformanceObserver.supportedEntryTypes.includes('longtask');
}
"""


#: a fixed piece of front-end work (JSON, escaping, string building; no DOM, so that the page
#: around it does not matter) whose time says how fast this machine runs JavaScript; best of runs
CALIBRATION_JS = r"""
() => {
  const t0 = performance.now();
  const rows = [];
  for (let i = 0; i < 2000; i++) rows.push({id: i, name: "row " + i, text: "lorem ipsum <dolor> sit & amet ".repeat(8), n: i * 1.5});
  let size = 0;
  for (let k = 0; k < 3; k++) {
    const back = JSON.parse(JSON.stringify(rows));
    const html = back.map((r) => `<tr><td>${r.id}</td><td>${r.name}</td><td>${r.text.replace(/[<&>]/g, (c) => "&#" + c.charCodeAt(0) + ";")}</td><td>${r.n.toFixed(2)}</td></tr>`).join("");
    size += html.length;
  }
  return size ? performance.now() - t0 : 0;
}
"""
#: its time (ms) on the machines the long-task budgets were set on (2 CPUs, Debian chromium): it
#: took 34-42 ms on one where bench/RESULTS.md's recorded runs went 2-2.9x slower
CALIBRATION_REF_MS = 18.0
#: the most a budget is stretched for a slow machine: beyond, a long task is a defect anywhere
MAX_STRETCH = 3.0


def long_task_budget(page: Any, base_ms: float = 100.0) -> float:
    """``base_ms`` on a machine of the reference speed; on a slower one (the calibration work takes
    longer here, best of 7), stretched in proportion, at most :data:`MAX_STRETCH` times. A page
    whose tasks grow with the machine's slowness passes anywhere; one that blocks longer than its
    work explains fails."""
    best = min(page.evaluate(CALIBRATION_JS) for _ in range(7))
    budget = base_ms * min(MAX_STRETCH, max(1.0, best / CALIBRATION_REF_MS))
    print(f"\nlong-task budget: {budget:.0f} ms (calibration {best:.0f} ms, reference {CALIBRATION_REF_MS:.0f} ms)")
    return budget


def save_screenshot(page: Any, name: str, full_page: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=full_page)
    return path


# --------------------------------------------------------------------------- themes and contrast
AXE_JS = Path(__file__).resolve().parent.parent / "js" / "node_modules" / "axe-core" / "axe.min.js"
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


def set_setting(server: JupyterServer, plugin: str, values: dict[str, Any]) -> None:
    """A JupyterLab setting for the pages opened from now on (``plugin`` as ``package:plugin``)."""
    server.api("PUT", f"/lab/api/settings/{plugin}", {"raw": json.dumps(values)})


def set_theme(server: JupyterServer, theme: str) -> None:
    """JupyterLab's (and Notebook 7's) theme for the pages opened from now on: ``light`` or ``dark``.

    Cells are not windowed either (every cell's DOM kept and laid out, so axe-core sees them all).
    """
    set_setting(server, "@jupyterlab/apputils-extension:themes", {"theme": THEMES[theme]})
    set_setting(server, "@jupyterlab/notebook-extension:tracker", {"windowingMode": "none"})


def axe_contrast(page: Any, selector: str) -> dict[str, Any]:
    """Run axe-core's color-contrast rule (WCAG AA) on the outputs holding ``selector``.

    axe-core takes JupyterLab's shell (an absolutely positioned box over the whole viewport) for an
    open modal dialog and then skips every element outside it, that is all of them. So the outputs
    are checked in a copy: a page with every stylesheet of the notebook page (JupyterLab's theme,
    the widgets' CSS, the outputs' own), the body's theme attributes, the notebook's background,
    and each cell's output area (its DOM as it is now) at its width. Returns ``{"checked": number
    of elements that passed, "violations": [...], "incomplete": [...], "roots": outputs copied}``,
    each finding with the element's HTML and the colours and ratio axe measured.
    """
    snapshot = page.evaluate(
        """(sel) => {
          const css = Array.from(document.styleSheets).map((s) => {
            try { return Array.from(s.cssRules).map((r) => r.cssText).join('\\n'); } catch (e) { return ''; }
          }).join('\\n');
          const areas = [];
          for (const n of document.querySelectorAll(sel)) {
            const area = n.closest('.jp-Cell-outputArea') || n;
            if (!areas.includes(area)) areas.push(area);
          }
          const nb = document.querySelector('.jp-Notebook') || document.body;
          const bg = (el) => { for (let e = el; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor;
            if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c; } return 'rgb(255, 255, 255)'; };
          return {css, bodyClass: document.body.className, attrs: Object.fromEntries(Array.from(document.body.attributes)
                    .filter((a) => a.name.startsWith('data-')).map((a) => [a.name, a.value])),
                  background: bg(nb), color: getComputedStyle(nb).color,
                  areas: areas.map((a) => ({html: a.outerHTML, width: a.getBoundingClientRect().width, bg: bg(a)}))};
        }""",
        selector,
    )
    copy = page.context.new_page()
    try:
        attrs = " ".join(f'{k}="{v}"' for k, v in snapshot["attrs"].items())
        body = "".join(f'<div class="mmsp-axe-area" style="width:{a["width"]}px;background:{a["bg"]};padding:4px">'
                       f'<div class="jp-Notebook">{a["html"]}</div></div>' for a in snapshot["areas"])
        copy.set_content(f'<!doctype html><html lang="en"><body class="{snapshot["bodyClass"]}" {attrs} '
                         f'style="background:{snapshot["background"]};overflow:auto;position:static">{body}</body></html>')
        copy.add_style_tag(content=snapshot["css"])
        copy.add_style_tag(content="html,body{overflow:auto!important;height:auto!important;position:static!important}")
        copy.add_script_tag(content=AXE_JS.read_text(encoding="utf-8"))
        copy.wait_for_timeout(200)
        result = copy.evaluate(
            """async () => {
              const r = await axe.run(document, {runOnly: {type: 'rule', values: ['color-contrast']},
                                                 resultTypes: ['violations', 'incomplete', 'passes']});
              const flat = (list) => list.flatMap((v) => v.nodes.map((n) => ({
                html: n.html.slice(0, 160), target: n.target.join(' '),
                data: (n.any[0] || {}).data || null, why: (n.any[0] || {}).message || ''})));
              return {checked: r.passes.reduce((k, v) => k + v.nodes.length, 0), violations: flat(r.violations),
                      incomplete: flat(r.incomplete)};
            }"""
        )
    finally:
        copy.close()
    result["roots"] = len(snapshot["areas"])
    return result
