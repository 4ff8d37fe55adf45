"""The wire inspector's data: what went over HTTP for a turn, and which UniEvent each frame became.

* :mod:`~mmsp_notebook.wire.sse`: cutting a response into SSE frames, telling its protocol;
* :mod:`~mmsp_notebook.wire.pairing`: pairing a client's UniEvents with those frames;
* :mod:`~mmsp_notebook.wire.capture`: :class:`~mmsp_notebook.wire.capture.Wire`, a turn's frames and
  events, built from the proxy's records;
* :mod:`~mmsp_notebook.wire.proxy`: :class:`~mmsp_notebook.wire.proxy.WireProxy`, the recording
  loopback proxy (also offered as ``mmsp_notebook.demo.WireProxy``), and
  :mod:`~mmsp_notebook.wire.proxies`, a session's running proxies.

Nothing here imports the engine, the views or the demo server; the engine sends turns through
the proxy (:mod:`mmsp_notebook.engine.wiretap`) and the views draw a wire (:mod:`mmsp_notebook.views.wire`).
"""
