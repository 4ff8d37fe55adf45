"""The notebook around a turn: failed cells as context ({Err}, %mmsp fix) and code into the next cell (--to-cell)."""

from __future__ import annotations

import nbformat
import pytest
from helpers import text_of
from nbclient import NotebookClient

from mmsp_notebook.front.cells import ErrorLog, _cell_error, check_to_cell, code_blocks, pick_code

ANSWER = """Here:

```python
print("one")
```

and

```bash
echo two
```

    indented = 3
"""


def test_code_blocks_are_picked_by_position_language_or_all():
    assert code_blocks(ANSWER) == [("python", 'print("one")\n'), ("bash", "echo two\n"), ("", "indented = 3\n")]
    assert pick_code(ANSWER) == 'print("one")\n\necho two\n\nindented = 3'
    assert pick_code(ANSWER, "2") == "echo two"
    assert pick_code(ANSWER, "python") == 'print("one")'
    assert pick_code(ANSWER, "PYTHON") == 'print("one")'
    assert pick_code(ANSWER, "4") is None and pick_code(ANSWER, "rust") is None and pick_code("no code") is None


def test_a_cell_error_keeps_the_end_of_its_traceback_and_no_key(monkeypatch):
    monkeypatch.setenv("CELLS_TEST_KEY", "sk-cells-0123456789abcdef")
    from mmsp_notebook.core.redact import register_secret_env

    register_secret_env("CELLS_TEST_KEY")

    def deep(n):
        if n == 0:
            raise ValueError("bad key sk-cells-0123456789abcdef")
        deep(n - 1)

    try:
        deep(50)
    except ValueError as exc:
        error = _cell_error(7, "key = 'sk-cells-0123456789abcdef'\ndeep(50)", exc)
    text = str(error)
    assert "sk-cells" not in text and text.startswith("In [7]:")
    assert "ValueError: bad key" in text and text.count('line ') <= 10
    log = ErrorLog({7: error})
    assert str(log) == text and log.last is error and "In[7]" in repr(log)
    assert "no cell has failed" in str(ErrorLog())


def run_cells(tmp_path, monkeypatch, sources: list[str], on_cell_executed=None) -> list:
    """The cells run in order in a real kernel (the demo model answering at once, traces under
    ``tmp_path``), errors allowed: the executed cells."""
    monkeypatch.setenv("MMSP_NOTEBOOK_DEMO_INSTANT", "1")
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True, on_cell_executed=on_cell_executed,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb.cells


def test_err_fix_and_to_cell_in_a_kernel(tmp_path, monkeypatch):
    sources = [
        "%load_ext mmsp_notebook",
        "%mmsp fix",                                           # 1: nothing failed yet
        "total = 10\ncount = 0\ntotal / count",                # 2: fails (In[3])
        "%%mmsp -o a\nWhat went wrong? {Err}",                 # 3
        "print(a.prompt['content_items'][0]['text'])",
        "print(Err[3].type, sorted(Err), 'Err' in get_ipython().run_line_magic('who_ls', ''))",
        "%mmsp fix",                                           # 6: offers a corrected cell
        "%%mmsp --to-cell 1 -o b\nShow me some code",          # 7
        "%%mmsp --to-cell rust\nShow me some code",            # 8: no such block: said, nothing offered
        "%mmsp fix 99",                                        # 9
        "%mmsp explain -o e",                                  # 10
        "print(e.status, 'ZeroDivisionError' in e.prompt['content_items'][0]['text'])",
    ]
    payloads: dict[int, list] = {}

    def on_executed(cell, cell_index, execute_reply):
        payloads[cell_index] = execute_reply["content"].get("payload", [])

    c = run_cells(tmp_path, monkeypatch, sources, on_executed)
    assert "no cell has failed in this kernel yet" in text_of(c[1])
    prompt = text_of(c[4])
    assert prompt.startswith("What went wrong? In [3]:") and "total / count" in prompt
    assert "ZeroDivisionError: division by zero" in prompt and "Traceback" in prompt
    assert text_of(c[5]).split() == ["ZeroDivisionError", "[3]", "False"]  # Err is not one of the user's variables (%who)
    fix = [p for p in payloads[6] if p.get("source") == "set_next_input"]
    assert len(fix) == 1 and fix[0]["replace"] is False and fix[0]["text"].strip()
    assert not any(o.output_type == "error" for o in c[6].outputs)
    offered = [p for p in payloads[7] if p.get("source") == "set_next_input"]
    assert len(offered) == 1 and "def summarize" in offered[0]["text"] and "```" not in offered[0]["text"]
    assert not [p for p in payloads[8] if p.get("source") == "set_next_input"]
    assert "--to-cell: the answer has no 'rust' code block" in text_of(c[8])
    assert "UsageError" in text_of(c[9]) and "In[99] did not fail" in text_of(c[9])
    assert text_of(c[11]).split() == ["complete", "True"]
    assert not [p for p in payloads[10] if p.get("source") == "set_next_input"]  # explain offers no cell


def test_the_names_the_package_relies_on_are_refused_as_out_and_the_log_stays(tmp_path, monkeypatch):
    from mmsp_notebook.front.cells import reserved_name

    for name in ("Err", "__session__", "In", "Out", "_", "__", "___", "_i", "_ii", "_iii", "_7", "_i7", "_oh",
                 "get_ipython", "print", "list", "id", "input"):
        assert reserved_name(name), name
    assert reserved_name("print") == "Python's builtin print"
    for name in ("answer", "err", "ERR", "_private", "Error", "_x1", "In2", "printed", "List"):
        assert reserved_name(name) is None, name
    sources = [
        "%load_ext mmsp_notebook",
        "1 / 0",                                                # 1: fails (In[2])
        "%%mmsp -o Err\nWhat went wrong? {Err}",                # 2: refused
        "%mmsp -o Err -m demo,demo+nothink What went wrong?",   # 3: refused, a comparison too
        "%%mmsp -o In\nhello",                                  # 4: IPython's history
        "%%mmsp -o _\nhello",                                   # 5
        "print(type(Err).__name__, sorted(Err))",               # 6: the log is intact
        "%%mmsp -o a\nWhat went wrong? {Err}",                  # 7: {Err} still works
        "print('ZeroDivisionError' in a.prompt['content_items'][0]['text'])",
        "Err = 'mine'",                                         # 9: the user's own assignment
        "%mmsp explain -o e",                                   # 10: the recorded log still answers
        "print(e.status, 'ZeroDivisionError' in e.prompt['content_items'][0]['text'])",
    ]
    c = run_cells(tmp_path, monkeypatch, sources)
    for i in (2, 3):
        said = text_of(c[i])
        assert "UsageError" in said and "-o Err: that name holds this kernel's log of failed cells" in said, said
        assert all(len(o.traceback) <= 1 for o in c[i].outputs if o.output_type == "error")
    assert "-o In: that name holds IPython's input history" in text_of(c[4])
    assert "-o _: that name holds one of IPython's" in text_of(c[5])
    assert text_of(c[6]).split() == ["ErrorLog", "[2]"]
    assert text_of(c[8]).strip() == "True"
    assert text_of(c[11]).split() == ["complete", "True"]


def test_a_block_number_below_one_is_refused_before_the_request_saying_n_counts_from_1(fresh_session):
    from IPython.core.error import UsageError
    from test_magic import shell

    from mmsp_notebook import OptionError

    for good in ("1", "12", "python", "all"):
        check_to_cell(good)
    ip = shell()
    for line in ("--to-cell 0", "--to-cell -1", "--to-cell=-1"):
        with pytest.raises(UsageError, match=r"^%%mmsp: --to-cell (0|-1): N counts the answer's code blocks from 1 "
                                             r"\(--to-cell 1 is the first\)"):
            ip.run_cell_magic("mmsp", line, "Show me some code")
    with pytest.raises(OptionError, match="from 1"):
        check_to_cell("+0")
    assert fresh_session.turns == []  # refused before the request


def test_the_builtins_are_refused_as_out_and_the_shell_keeps_them(fresh_session):
    """``%mmsp -o __builtins__ hi`` replaced the namespace's builtins by the turn: every later cell
    failed ("'Turn' object is not subscriptable" for print, len...) until the kernel restarted."""
    from test_magic import shell

    from mmsp_notebook.front.cells import reserved_name

    assert reserved_name("__builtins__") and reserved_name("__builtin__")
    ip = shell()
    for name in ("__builtins__", "__builtin__"):
        result = ip.run_cell(f"%mmsp -o {name} hi")
        assert not result.success and f"-o {name}: that name holds" in str(result.error_in_exec)
    assert fresh_session.turns == []  # nothing was sent
    after = ip.run_cell("len(str(print))")
    assert after.success and after.result > 0
