"""Kernel defaults from IPython's configuration system, %mmsp config and model aliases, with one precedence:
the magic's option > %mmsp config > IPython configuration (traitlets) > the environment."""

from __future__ import annotations

from helpers import text_of
from test_magic import notebook, run_notebook


def test_precedence_and_aliases_in_a_kernel_with_a_configured_profile(tmp_path, monkeypatch):
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text(
        'c.MMSPMagics.model = "demo+nothink"\n'
        'c.MMSPMagics.max_tokens = 30\n'
        'c.MMSPMagics.aliases = {"brief": "demo+tps=800 --system \'Be brief\' --max-tokens 12"}\n')
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("MMSP_NOTEBOOK_MODEL", "demo+tps=5")  # the environment ranks lowest
    monkeypatch.setenv("DEMO_KEY", "not-a-real-key")
    nb = notebook(
        "%load_ext mmsp_notebook",
        "%%mmsp -o a\nhello",                                           # 1: configuration over environment
        "print(a.model, a.config.get('max_tokens'))",
        "%mmsp config model=demo",                                      # 3: %mmsp config over configuration
        '%config MMSPMagics.model = "demo+tps=7"',                      # 4: ... also when configured later
        "%%mmsp -o b\nhello",
        "print(b.model, b.config.get('max_tokens'))",
        "%%mmsp -m demo+tps=900 -o c\nhello",                           # 7: the option over everything
        "print(c.model)",
        "%%mmsp -m brief -o d\nhello",                                  # 9: an alias from the configuration
        "print(d.model, d.config.get('system_prompt'), d.config.get('max_tokens'))",
        "from mmsp_notebook.demo import DemoServer\nserver = DemoServer(instant=True).start()",
        "%mmsp alias oc = openai-chat:demo --base-url {server.base_url} --api-key-env DEMO_KEY",
        "%%mmsp -m oc -o e --max-tokens 20\nhello",                     # 13: an alias with its endpoint
        "print(e.model, e.client_type, e.status, e.config.get('max_tokens'))",
        "%mmsp models",
        "%mmsp alias",
        "%mmsp alias oc =\n%mmsp alias",
        "%mmsp alias loop = brief",
    )
    run_notebook(nb, tmp_path, monkeypatch, allow_errors=True)
    c = nb.cells
    assert text_of(c[2]).split() == ["demo+nothink", "30"]
    assert text_of(c[6]).split() == ["demo", "30"]
    assert text_of(c[8]).split() == ["demo+tps=900"]
    assert text_of(c[10]).split() == ["demo+tps=800", "Be", "brief", "12"]
    assert text_of(c[14]).split() == ["demo", "openai-chat", "complete", "20"]
    assert "alias for demo --client-type openai-chat" in text_of(c[15])
    assert "brief" in text_of(c[16]) and "oc" in text_of(c[16])
    assert "'oc'" not in text_of(c[17]) and "brief" in text_of(c[17])
    assert "UsageError" in text_of(c[18]) and "names another alias" in text_of(c[18])
    assert "not-a-real-key" not in "".join(text_of(x) for x in c)  # the alias names the variable, never the key


def test_a_bad_configured_value_is_refused_with_the_option_named(tmp_path, monkeypatch):
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text('c.MMSPMagics.temperature = -1.0\n')
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = notebook("%load_ext mmsp_notebook", "%mmsp config")
    run_notebook(nb, tmp_path, monkeypatch, allow_errors=True)
    assert "temperature must be a finite number of at least 0" in text_of(nb.cells[0])
    # the extension loaded all the same, without that value
    assert "(left out)" in text_of(nb.cells[0]) and not any(o.output_type == "error" for c in nb.cells for o in c.outputs)
    assert "'temperature': None" in text_of(nb.cells[1])
