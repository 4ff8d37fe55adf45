"""One options check for every door: the magic's arguments, %mmsp config, ask()/launch() and Chat."""

from __future__ import annotations

import math
import re

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

from mmsp_notebook import OptionError
from mmsp_notebook.engine.launch import launch
from mmsp_notebook.engine.options import Settings, TurnOptions, check_option

BAD = [
    ("temperature", "-3", "temperature must be a finite number of at least 0"),
    ("temperature", "nan", "temperature must be a finite number of at least 0"),
    ("temperature", "inf", "temperature must be a finite number of at least 0"),
    ("temperature", "hot", "temperature takes a number"),
    ("max_tokens", "0", "max_tokens must be at least 1"),
    ("max_tokens", "lots", "max_tokens takes a whole number"),
    ("max_steps", "-1", "max_steps must be at least 1"),
    ("thinking", "enormous", "thinking takes one of none, low"),
    ("client_type", "bogus", "unknown client type 'bogus'"),
    ("api_key_env", "sk-live-0123456789", "name of an environment variable"),
    ("base_url", "localhost:8000/v1", r"base_url takes an http:// or https:// URL with a host .*not 'localhost:8000/v1'"),
    ("base_url", "ftp://example.com", "base_url takes an http:// or https:// URL"),
    ("base_url", "http://", "base_url takes an http:// or https:// URL"),
    ("base_url", "http://host:port/v1", "base_url takes an http:// or https:// URL"),
    # a demo model's name is read as the demo server reads it (every turn on a bad one would fail)
    ("model", "demo+tps=abc", r"model 'demo\+tps=abc': \+tps=abc is not a number"),
    ("model", "demo+tps=200+tps=10", r"model 'demo\+tps=200\+tps=10': \+tps given twice"),
    ("model", "demo-embed+dim=0", r"model 'demo-embed\+dim=0': \+dim must be at least 1"),
    ("model", "demo+turbo", r"Model not found: demo\+turbo \(unknown option \+turbo\)"),
]


@pytest.fixture()
def shell(fresh_session):
    start_ipython()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mmsp_notebook")
    return ip


@pytest.mark.parametrize("name,value,said", BAD)
def test_a_bad_value_gets_the_same_answer_through_every_door(shell, fresh_session, name, value, said):
    # %mmsp config
    with pytest.raises(UsageError, match=said):
        shell.run_line_magic("mmsp", f"config {name}={value}")
    assert getattr(fresh_session.settings, name) == getattr(Settings(), name)  # nothing was changed
    # the magic's option
    with pytest.raises(UsageError, match=said):
        shell.run_cell_magic("mmsp", f"--{name.replace('_', '-')} {value}", "hi")
    # ask() / launch() with the text or the Python value
    with pytest.raises(OptionError, match=said):
        launch("hi", **{name: value})
    python_value: object = value
    try:
        python_value = float(value) if name == "temperature" else int(value) if name.startswith("max") else value
    except ValueError:
        pass
    with pytest.raises(OptionError, match=said):
        launch("hi", **{name: python_value})
    # the chat, refused when it is made, not at its first message
    from mmsp_notebook import Chat

    with pytest.raises(OptionError, match=said):
        Chat(**{name: python_value})
    assert fresh_session.turns == []  # no door started a turn


def test_the_key_given_by_mistake_for_its_variable_is_not_echoed():
    with pytest.raises(OptionError) as caught:
        check_option("api_key_env", "sk-live-0123456789")
    assert "sk-" not in str(caught.value)


def test_an_endpoint_is_an_http_url_and_a_key_pasted_there_is_not_echoed():
    for url in ("http://localhost:8000/v1", "https://api.example.com", "http://[::1]:8000/v1", " http://127.0.0.1:9/v1 "):
        assert check_option("base_url", url) == url.strip()
    with pytest.raises(OptionError) as caught:
        check_option("base_url", "sk-proj-0123456789abcdefghijklmnop")
    assert "0123456789" not in str(caught.value)


def test_values_are_parsed_once_and_typed():
    opts = TurnOptions(temperature="0.25", max_tokens="12", thinking="low", max_steps=3.0)
    assert (opts.temperature, opts.max_tokens, opts.thinking, opts.max_steps) == (0.25, 12, "low", 3)
    assert isinstance(opts.max_tokens, int) and isinstance(opts.max_steps, int)
    settings = Settings()
    settings.set("temperature", "0.5")
    settings.set("max-tokens", "7")
    settings.set("system", "none")
    settings.set("trace", "off")
    assert (settings.temperature, settings.max_tokens, settings.system, settings.trace) == (0.5, 7, None, False)
    with pytest.raises(OptionError, match="model cannot be empty"):
        settings.set("model", "")
    with pytest.raises(OptionError, match="unknown setting 'colour'"):
        settings.set("colour", "blue")
    with pytest.raises(OptionError, match="true or false"):
        settings.set("strict", "maybe")


def test_a_turn_takes_what_it_was_not_given_from_the_kernel(fresh_session):
    fresh_session.settings.set("temperature", "0.7")
    fresh_session.settings.set("max_tokens", "9")
    opts = TurnOptions(max_tokens=3).over(fresh_session.settings)
    assert opts.temperature == 0.7 and opts.max_tokens == 3 and opts.model == fresh_session.settings.model
    assert opts.config(trace_id="a/b") == {"temperature": 0.7, "max_tokens": 3, "trace_id": "a/b"}
    run, future = launch("hi", max_tokens=4, trace=False)
    turn = future.result(30)
    assert turn.config["max_tokens"] == 4 and math.isclose(turn.config["temperature"], 0.7)
    assert turn.status == "complete"


def test_a_bad_demo_model_the_kernel_holds_is_refused_at_its_turn_as_an_option_not_sent(fresh_session):
    # (a name no door checked: MMSP_NOTEBOOK_MODEL, read when the session is made)
    fresh_session.settings.model = "demo+tps=abc"
    with pytest.raises(OptionError, match=r"model 'demo\+tps=abc': \+tps=abc is not a number"):
        launch("hi")
    assert fresh_session.turns == []


@pytest.mark.parametrize("spec, said", [
    ("openai-chat:", "a model id goes after 'openai-chat:'"),
    ("demo+tps=abc --system hi", r"model 'demo\+tps=abc': \+tps=abc is not a number"),
    ("openai-chat:demo+rows=1+tokens=1", r"choose \+tokens=N \(a text\) or \+rows=N \(a table\), not both"),
    ("demo --bogus 1", "unexpected '--bogus 1'"),
    ("demo two words", "unexpected 'two words'"),
])
def test_a_bad_alias_is_refused_in_one_line(spec, said, capsys):
    from mmsp_notebook.engine.options import parse_alias

    with pytest.raises(OptionError, match=said):
        parse_alias(spec)
    assert capsys.readouterr().err == ""  # no argparse usage text besides
    assert parse_alias("llama3:8b").model == "llama3:8b"  # a model id with a colon keeps it


def test_an_alias_may_not_take_the_name_of_a_model_or_name_itself(shell, fresh_session):
    import mmsp

    known = mmsp.list_supported_models()[0]["model"]
    for name in ("demo", "demo-embed", "demo+nothink", known):
        # it would take the model's place in every turn on it (and %mmsp models would list the name twice)
        with pytest.raises(UsageError, match=rf"^%mmsp alias: alias '{re.escape(name)}': '{re.escape(name)}' names a "
                                             rf"(demo model|model mmsp knows).*name the alias otherwise \(e.g. my-"):
            shell.run_line_magic("mmsp", f"alias {name} = demo+nothink")
    assert fresh_session.settings.aliases == {}
    assert list(shell.run_line_magic("mmsp", "models")["model"]).count("demo") == 1
    with pytest.raises(OptionError, match=r"^alias 'a1': an alias cannot name itself; name the model it stands for"):
        fresh_session.settings.add_alias("a1", "a1 --system hi")
    with pytest.raises(OptionError, match=r"^alias 'a2' names another alias \('fast'\)"):
        fresh_session.settings.add_alias("fast", "demo")
        fresh_session.settings.add_alias("a2", "fast")
    assert list(fresh_session.settings.aliases) == ["fast"]


def test_a_list_of_models_is_refused_where_one_model_is_meant(shell, fresh_session):
    from mmsp_notebook import Chat

    said = "takes one model id, not 'demo,demo[+]nothink': to compare models"
    with pytest.raises(UsageError, match=said):
        shell.run_line_magic("mmsp", "config model=demo,demo+nothink")
    assert fresh_session.settings.model == "demo"  # every later turn would have failed
    with pytest.raises(UsageError, match=said):
        shell.run_line_magic("mmsp", "alias pair = demo,demo+nothink")
    for door in (lambda: launch("hi", model="demo,demo+nothink"), lambda: Chat(model="demo,demo+nothink")):
        with pytest.raises(OptionError, match=said):
            door()
    assert fresh_session.turns == []
    shell.run_cell_magic("mmsp", "-m demo,demo+nothink -o pair", "hi")  # where a list is meant, it compares
    assert [t.status for t in shell.user_ns["pair"].turns] == ["complete", "complete"]


def test_a_system_prompt_with_a_lone_surrogate_is_refused_before_a_request_in_every_door(fresh_session):
    # text decoded with surrogateescape (a file's bad bytes): named before a request, never a UnicodeEncodeError
    said = r"system holds a lone surrogate \('\\udcff'\) at character 4, .*errors='replace'"
    with pytest.raises(OptionError, match=said):
        launch("hi", system="Be b\udcffrief")
    with pytest.raises(OptionError, match=said):
        Settings().set("system", "Be b\udcffrief")
    with pytest.raises(OptionError, match=said):
        TurnOptions(system="Be b\udcffrief")
    assert fresh_session.turns == []


def test_a_key_given_as_an_option_s_value_by_mistake_is_not_echoed_by_its_error(fresh_session):
    """thinking='sk-…' (a key pasted in the wrong place): the refusal says what the option takes, not the key."""
    import io

    from mmsp_notebook import OptionError, ask
    from mmsp_notebook.engine.options import check_option

    key = "sk-proj-" + "Ab3" * 12
    for name, value in (("thinking", key), ("max_tokens", key), ("temperature", key), ("client_type", key),
                        ("model", [key, key])):
        with pytest.raises(OptionError) as caught:
            check_option(name, value)
        assert key not in str(caught.value), caught.value
        assert name == "model" or "[redacted]" in str(caught.value)
    with pytest.raises(OptionError) as caught:
        ask("hi", thinking=key, stream=io.StringIO())
    assert key not in str(caught.value) and "thinking takes one of" in str(caught.value)


def test_the_repr_of_options_and_settings_keeps_a_base_urls_credentials_out():
    """A repr shows up in tracebacks (IPython's verbose mode prints locals), logs and a cell's value: a
    base URL's password and a key in its query are redacted there; the values themselves still work."""
    url = "https://user:hunter2secret@example.com/v1?key=qry7Xk2Lm8Qp4Zt6"
    settings = Settings(base_url=url)
    settings.add_alias("fast", f"openai-chat:m --base-url {url}")
    for shown in (repr(TurnOptions(model="m", base_url=url)), repr(settings), str(settings)):
        assert "hunter2secret" not in shown and "qry7Xk2Lm8Qp4Zt6" not in shown, shown
        assert "https://user:[redacted]@example.com/v1?key=[redacted]" in shown
    assert settings.base_url == url and settings.aliases["fast"].base_url == url

@pytest.mark.parametrize("line, said", [
    ("-m demo -m demo+nothink", r"argument -m/--model: given twice \('demo', then 'demo\+nothink'\): give it once; "
                                r"to compare models, give them as one list: -m a,b"),
    ("--model=demo -m demo+nothink", r"argument -m/--model: given twice"),
    ("--temp 0.2 --temperature 0.3", r"argument --temperature: given twice \('0.2', then '0.3'\)"),
    ("--system 'Be brief' --system 'Be long'", r"argument --system: given twice \('Be brief', then 'Be long'\)"),
    ("-o a --out b", r"argument -o/--out: given twice \('a', then 'b'\)"),
    ("--tools f --tools g", r"argument --tools: given twice \('f', then 'g'\)"),
    ("--to-cell --to-cell 2", r"argument --to-cell: given twice \('all', then '2'\)"),
    ("--new --new", r"argument --new: given twice: give it once"),
    ("--base-url http://u:sk-proj-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA@h/v1 --base-url http://h/v1",
     r"argument --base-url: given twice \('http://u:\[redacted\]@h/v1', then 'http://h/v1'\)"),
])
def test_an_option_given_twice_is_refused_naming_it(shell, fresh_session, line, said):
    # the last one silently won: -m demo -m other sent the prompt to other alone
    with pytest.raises(UsageError, match="^%%mmsp: " + said) as caught:
        shell.run_cell_magic("mmsp", line, "hi")
    assert "sk-proj-" not in str(caught.value)
    with pytest.raises(UsageError, match="^%mmsp: " + said):
        shell.run_line_magic("mmsp", line + " -- hi")
    assert fresh_session.turns == []  # nothing was sent


def test_a_setting_or_an_alias_option_given_twice_is_refused(shell, fresh_session):
    from mmsp_notebook.engine.options import parse_alias

    for pairs in ("model=demo model=demo+nothink", "max-tokens=3 max_tokens=4"):
        with pytest.raises(UsageError, match=r"^%mmsp config: (model|max_tokens) given twice: give each setting "
                                             r"once \(nothing was changed\)"):
            shell.run_line_magic("mmsp", f"config {pairs}")
    assert (fresh_session.settings.model, fresh_session.settings.max_tokens) == ("demo", Settings().max_tokens)
    with pytest.raises(OptionError, match=r"^alias: argument --system: given twice \('x', then 'y'\): give it once"):
        parse_alias("demo --system x --system y")
    with pytest.raises(UsageError, match="given twice"):
        shell.run_line_magic("mmsp", "alias fast = demo --max-tokens 5 --max-tokens 6")
    assert "fast" not in fresh_session.settings.aliases


def test_each_option_once_is_taken_and_the_value_marker_may_repeat(shell, fresh_session):
    shell.run_cell_magic("mmsp", "-m demo+nothink --temperature 0.2 --new -o once", "hi")
    turn = shell.user_ns["once"]
    assert turn.status == "complete" and turn.model == "demo+nothink"
    # x = %mmsp ... adds --value itself, also to a line that holds it already
    result = shell.run_cell("x = %mmsp --value -m demo hi again")
    assert result.success and shell.user_ns["x"].status == "complete"
