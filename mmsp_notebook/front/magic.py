"""``%%mmsp`` and ``%mmsp``: talk to a model from a cell, streamed live into the cell."""

from __future__ import annotations

import copy
import difflib
import keyword
import os
import re
import shlex
import sys
import traceback
import unicodedata
import warnings
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Dict, Float, Integer, Unicode, observe

from .._errors import OptionError, TurnError
from ..core.redact import redact, redact_value
from ..engine.launch import check_chat_name, interpolate, launch, user_message
from ..engine.options import THINKING_LEVELS, Once, OnceFlag, Settings
from ..engine.session import session
from .cells import (
    FIX_SYSTEM,
    ErrorLog,
    check_to_cell,
    error_log,
    explain_prompt,
    fix_prompt,
    forget_errors,
    pick_code,
    record_errors,
    reserved_name,
)
from .finish import Interrupted, present
from .frames import history_frame, models_frame, usage_frame
from .warm import warm_up

__all__ = ["MMSPMagics", "load_ipython_extension"]

SUBCOMMANDS = ("models", "history", "reset", "config", "alias", "usage", "error", "fix", "explain", "help")


def _notebook_name(shell: Any) -> str:
    path = shell.user_ns.get("__session__") or os.environ.get("JPY_SESSION_NAME") or ""
    return Path(str(path)).stem or "notebook"


@magics_class
class MMSPMagics(Magics):
    """The mmsp magics, configurable through IPython's configuration system.

    ``c.MMSPMagics.model = "demo"`` in ``ipython_config.py`` (or ``%config MMSPMagics.model = "demo"``)
    sets a kernel default, as ``%mmsp config model=demo`` does; what ``%mmsp config`` set in this
    kernel wins over the configuration, which wins over the environment (``MMSP_NOTEBOOK_MODEL``);
    an option of the magic itself wins over all of them. ``c.MMSPMagics.aliases = {"fast":
    "openai-chat:gpt-x --base-url URL --api-key-env NAME"}`` names models as ``%mmsp alias`` does.
    """

    model = Unicode(None, allow_none=True, help="default model id").tag(config=True)
    client_type = Unicode(None, allow_none=True, help="default mmsp client type").tag(config=True)
    base_url = Unicode(None, allow_none=True, help="default endpoint base URL").tag(config=True)
    api_key_env = Unicode(None, allow_none=True, help="name of the variable holding the API key").tag(config=True)
    system = Unicode(None, allow_none=True, help="default system prompt").tag(config=True)
    thinking = Unicode(None, allow_none=True, help="default thinking level").tag(config=True)
    max_tokens = Integer(None, allow_none=True, help="default cap on output tokens").tag(config=True)
    temperature = Float(None, allow_none=True, help="default sampling temperature").tag(config=True)
    max_steps = Integer(None, allow_none=True, help="most model responses in one turn's tool loop").tag(config=True)
    timeout = Float(None, allow_none=True, help="idle seconds before a silent turn is ended").tag(config=True)
    trace = Bool(None, allow_none=True, help="trace every turn").tag(config=True)
    strict = Bool(None, allow_none=True, help="raise when a turn does not complete").tag(config=True)
    events = Bool(None, allow_none=True, help="show the UniEvents table under every turn").tag(config=True)
    demo_instant = Bool(None, allow_none=True, help="the demo server answers at once").tag(config=True)
    aliases = Dict(default_value={}, help="model aliases: name -> '[CLIENT_TYPE:]MODEL [--base-url URL] ...'").tag(
        config=True)

    #: configured values are applied by __init__ itself, each on its own (see there)
    _ready = False
    #: the magic a turn was asked through, as its errors name it (%%mmsp or %mmsp)
    _door = "%%mmsp"

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        # each configured value on its own: a bad one is named and left out, the others apply
        # (the extension still loads: the configuration keeps what was written in it)
        for name, value in self.trait_values().items():
            if name in Settings.option_names() or name == "aliases":
                try:
                    self._configure({name: value})
                except UsageError as exc:
                    print(f"{exc} (left out)", file=sys.stderr)
                    self.set_trait(name, {} if name == "aliases" else None)
        self._ready = True

    @observe(*Settings.option_names(), "aliases")
    def _on_config(self, change: Any) -> None:
        if not self._ready:
            return
        try:
            self._configure({change["name"]: change["new"]})
        except UsageError:
            # refused: the setting keeps its value (``%config MMSPMagics`` shows what is in effect)
            self.set_trait(change["name"], change["old"])
            raise

    def _configure(self, values: dict[str, Any]) -> None:
        settings = session().settings
        options = {k: v for k, v in values.items() if k in Settings.option_names() and v is not None}
        trial = copy.deepcopy(settings)  # all or nothing, as Settings.update: checked whole, then taken
        try:
            trial.configure(options)
            for name, spec in (values.get("aliases") or {}).items():
                trial.add_alias(name, spec)
        except OptionError as exc:
            raise UsageError(f"MMSPMagics configuration: {exc}") from None
        settings.__dict__.update(trial.__dict__)

    @magic_arguments()
    @argument("-m", "--model", default=None, action=Once, help="model id (default: MMSP_NOTEBOOK_MODEL, else the offline 'demo')")
    @argument("--client-type", default=None, action=Once, help="mmsp client type, e.g. openai-chat, ant-messages, mmsp")
    @argument("--base-url", default=None, action=Once, help="endpoint base URL")
    @argument("--api-key-env", default=None, action=Once, metavar="NAME",
              help="name of the environment variable holding the API key (never the key itself)")
    @argument("--system", default=None, action=Once, help="system prompt")
    @argument("--thinking", default=None, action=Once, help=f"thinking level: {', '.join(THINKING_LEVELS)}")
    @argument("--max-tokens", default=None, action=Once, help="cap on output tokens")
    @argument("--temperature", default=None, action=Once, help="sampling temperature (a number, at least 0)")
    @argument("--tools", default=None, action=Once, metavar="F,G", help="Python functions of this namespace offered as tools")
    @argument("--max-steps", default=None, action=Once, help="most model responses in one turn's tool loop (default 8)")
    @argument("--timeout", default=None, action=Once, metavar="SECONDS",
              help="end the turn after this many seconds without a byte or event from the server (default 120; none: no limit)")
    @argument("--chat", default=None, action=Once, metavar="NAME", help="named conversation (default: one per notebook)")
    @argument("--new", action=OnceFlag, help="start the conversation fresh")
    @argument("--trace", default=None, action=Once, metavar="ID",
              help="trace id (default: <notebook>/<chat>, one trace per conversation)")
    @argument("--no-trace", action=OnceFlag, help="do not trace this turn")
    @argument("--events", action=OnceFlag, help="also show the UniEvents as a live table")
    @argument("--wire", action=OnceFlag,
              help="send the turn through a recording loopback proxy and show the raw SSE frames next to their UniEvents")
    @argument("-o", "--out", default=None, action=Once, metavar="VAR", help="store the turn's result in this variable")
    @argument("--strict", action=OnceFlag, help="raise when the turn does not complete")
    # (--value alone may repeat: the input transformer adds it to x = %mmsp ..., which may hold it already)
    @argument("--value", action="store_true",
              help="(line magic) the turn is the line's value: what `x = %%mmsp a prompt` gives x (set there by itself)")
    @argument("--to-cell", nargs="?", const="all", default=None, action=Once, metavar="N|LANG",
              help="put the answer's code blocks into a new cell below (all, the n-th, or those of a language)")
    @argument("rest", nargs="*", help="(line magic) a subcommand: models, history, reset, config k=v, alias, usage, "
                                      "error, fix [N], explain [N]")
    @no_var_expand
    @line_cell_magic
    def mmsp(self, line: str = "", cell: str | None = None) -> Any:
        """Talk to a model: ``%%mmsp [options]`` streams the cell's prompt into the cell.

        The prompt interpolates ``{expr}`` from the notebook's namespace (``{{``/``}}`` for braces);
        an image value (PIL image, PNG/JPEG bytes, a path) is sent as an image. Option values take
        shell quoting (``--system "Be brief"``); each option is given once (a second is refused). ``{Err}`` is the last failed cell with its traceback
        (``{Err[5]}`` that of ``In[5]``). ``--to-cell`` puts the answer's code into a new cell below.
        Line magic: ``%mmsp models | history | reset | config key=value | alias NAME = SPEC | usage |
        error | fix [N] | explain [N]``, or ``%mmsp [options] a one-line prompt`` (``--`` before a
        prompt that starts with ``-``).
        """
        try:
            return self._mmsp(line, cell)
        except UsageError as exc:  # it may quote what was typed: a key pasted by mistake (--key=sk-...)
            said = redact(str(exc))
            if said != str(exc):
                raise UsageError(said) from None
            raise

    def _mmsp(self, line: str, cell: str | None) -> Any:
        bare = re.sub(r"^\s*--value(?:\s+|$)", "", line)  # (x = %mmsp alias: the aliases are x's value)
        if cell is None and bare.split(None, 1)[:1] == ["alias"]:
            return self._alias(bare.split(None, 1)[1] if " " in bare.strip() else "")
        args = _parse(self.mmsp, line, cell is not None)
        self._door = "%%mmsp" if cell is not None else "%mmsp"  # (named in the errors of the turn below)
        # each option's value is expanded as IPython expands a magic's line ({url}, $model), after the
        # line is split, so a value with spaces stays one value (--system {prompt}); a one-line
        # prompt is interpolated by interpolate() (which also sends an image value as an image)
        for key, value in vars(args).items():
            if isinstance(value, str) and key != "rest":
                setattr(args, key, self._expand(value))
        sess = session()
        sess.notebook = _notebook_name(self.shell)
        if args.model and args.model.endswith(",") and args.rest:  # -m a, b: the list was split at its space
            raise UsageError(f"%{'%' if cell is not None else ''}mmsp: -m {args.model} {args.rest[0]}: write the "
                             "models without spaces (-m a,b,c) or quote them (-m 'a, b, c')")
        if cell is None:
            if args.rest and args.rest[0] in ("fix", "explain"):
                return self._fix(args, args.rest[0], args.rest[1:])
            if args.rest and args.rest[0] in SUBCOMMANDS:
                return self._subcommand(args, args.rest[0], args.rest[1:])
            if not args.rest:
                return self._subcommand(args, "help", [])
            if len(args.rest) == 1:
                near = difflib.get_close_matches(args.rest[0].lower(), SUBCOMMANDS, n=1, cutoff=0.85)
                if near:
                    raise UsageError(f"%mmsp: unknown subcommand {args.rest[0]!r}; did you mean {near[0]!r}? "
                                     f"(to send it as a prompt: %mmsp -- {args.rest[0]})")
            prompt = _prompt_of(line, args.rest)
        else:
            if args.rest:
                raise UsageError(f"%%mmsp: unexpected argument {' '.join(args.rest)!r} (the prompt goes in the cell)")
            prompt = cell
        return self._turn(args, prompt)

    def _expand(self, text: str) -> str:
        """``{expr}`` and ``$name`` from the notebook's namespace, as IPython expands a magic's line
        (left as written where it cannot be expanded)."""
        from IPython.utils.text import DollarFormatter

        try:
            return DollarFormatter().vformat(text, args=[], kwargs=dict(self.shell.user_ns))
        except Exception:
            return text

    # ------------------------------------------------------------------ one turn
    def _fix(self, args: Any, name: str, rest: list[str]) -> Any:
        """``%mmsp fix [N]``: the last failed cell (or ``In[N]``) and its traceback, sent for a corrected
        cell that is offered as the next cell; ``%mmsp explain [N]``: why it failed."""
        log = error_log(self.shell)
        if not isinstance(log, ErrorLog) or not log:
            print("no cell has failed in this kernel yet: run the failing cell, then %mmsp " + name)
            return None
        if rest and not (len(rest) == 1 and rest[0].isdigit()):
            raise UsageError(f"%mmsp {name}: takes the number of a failed cell (In[N]), or nothing for the last one")
        error = log.get(int(rest[0])) if rest else log.last
        if error is None:
            raise UsageError(f"%mmsp {name}: In[{rest[0]}] did not fail; failed cells: {', '.join(map(str, sorted(log)))}")
        if name == "fix":
            args.system = args.system or FIX_SYSTEM
            args.to_cell = args.to_cell or "all"
            return self._turn(args, fix_prompt(error), literal=True)
        return self._turn(args, explain_prompt(error), literal=True)

    def _turn(self, args: Any, prompt: str, literal: bool = False) -> Any:
        """One turn; ``literal`` sends the prompt as written (no ``{expr}`` interpolation)."""
        sess = session()
        if args.out is not None:  # (as Python reads the name in code: NFKC, -o ﬁ is the variable fi)
            args.out = unicodedata.normalize("NFKC", args.out)
        if args.out is not None and (not args.out.isidentifier() or keyword.iskeyword(args.out)):
            raise UsageError(f"{self._door}: -o/--out takes a variable name, not {args.out!r}")
        held = None if args.out is None else reserved_name(args.out)
        if held is not None:
            raise UsageError(f"{self._door}: -o {args.out}: that name holds {held}; keep the turn under another name "
                             "(-o answer)")
        if args.to_cell is not None:
            try:
                check_to_cell(args.to_cell)
            except OptionError as exc:
                raise UsageError(f"{self._door}: {exc}") from None
        tools = []
        if args.tools:
            for name in [n.strip() for n in args.tools.split(",") if n.strip()]:
                func = self.shell.user_ns.get(name)
                if func is None:
                    raise UsageError(f"{self._door}: --tools: no function named {name!r} in this notebook")
                if not callable(func):
                    raise UsageError(f"{self._door}: --tools: {name!r} is not callable")
                tools.append(func)
        if args.trace is not None and args.no_trace:
            raise UsageError(f"{self._door}: --trace and --no-trace contradict each other")
        if args.model and "," in args.model:
            return self._compare(args, prompt, tools, literal)
        out = args.out

        def keep(turn: Any) -> None:
            if out:
                self.shell.user_ns[out] = turn
            if args.to_cell and turn.status == "complete":
                self._to_cell(turn, args.to_cell)

        try:
            message = self._message(prompt, literal)
            run, future = launch(
                message,
                model=args.model,
                client_type=args.client_type,
                base_url=args.base_url,
                api_key_env=args.api_key_env,
                system=args.system,
                thinking=args.thinking,
                max_tokens=args.max_tokens,
                temperature=args.temperature,
                tools=tools,
                max_steps=args.max_steps,
                timeout=args.timeout,
                chat=args.chat,
                new=args.new,
                trace=False if args.no_trace else args.trace,  # ('' is refused as the empty trace id it is)
                wire=args.wire,
            )
        except OptionError as exc:
            raise UsageError(f"{self._door}: {exc}") from None
        try:  # (at once: the view's start is where an interrupt ends the turn)
            turn = present(run, future, events=True if args.events else None, strict=True if args.strict else None,
                           wire=args.wire, keep=keep, sess=sess)
        except (TurnError, Interrupted) as exc:
            _shown_short(exc)
            raise
        if out or args.value:
            return turn  # -o: the cell's value too (its summary line: the live view already shows the turn)
        # no Out[n] repeating the footer under every cell; `_` (and Out[n]) still hold the turn
        hook = getattr(self.shell, "displayhook", None)
        if hook is not None and hasattr(hook, "update_user_ns"):
            hook.update_user_ns(turn)
        return None

    def _message(self, prompt: str, literal: bool) -> dict[str, Any]:
        """The cell's user message: its prompt interpolated (unless ``literal``), what the
        interpolation warns of (a ``{...}`` that calls, left as written; an animated image's one
        frame) said in one line each, without the warning's source location."""
        if literal:
            return user_message(prompt.strip(), [])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            text, images = interpolate(prompt.strip("\n"), self.shell.user_ns)
        for w in caught:
            print(f"{self._door}: {w.message}", file=sys.stderr)
        return user_message(text.strip(), images)

    def _compare(self, args: Any, prompt: str, tools: list[Any], literal: bool) -> Any:
        """``-m a,b,c``: the prompt to every model at once, in columns (see :mod:`.compare`)."""
        from .compare import compare

        for flag, name in ((args.wire, "--wire"), (args.to_cell, "--to-cell"), (args.trace is not None, "--trace ID"),
                           (args.events, "--events")):
            if flag:
                raise UsageError(f"{self._door}: {name} is for one model; a comparison (-m a,b) does not take it")
        try:
            message = self._message(prompt, literal)
            comparison = compare(message, args.model, chat=args.chat, new=args.new, tools=tools,
                                 system=args.system, thinking=args.thinking, max_tokens=args.max_tokens,
                                 temperature=args.temperature, max_steps=args.max_steps, timeout=args.timeout,
                                 client_type=args.client_type, base_url=args.base_url, api_key_env=args.api_key_env,
                                 trace=False if args.no_trace else None,
                                 strict=True if args.strict else None, keep=self._keeper(args.out))
        except OptionError as exc:
            raise UsageError(f"{self._door}: {exc}") from None
        except (TurnError, Interrupted) as exc:
            _shown_short(exc)
            raise
        return comparison

    def _keeper(self, out: str | None) -> Any:
        def keep(value: Any) -> None:
            if out:
                self.shell.user_ns[out] = value
        return keep

    def _to_cell(self, turn: Any, which: str) -> None:
        """The answer's code as the next cell: JupyterLab and Notebook insert it below, terminal IPython
        puts it at the next prompt."""
        code = pick_code(turn.text, which)
        if code is None:
            print(f"--to-cell: the answer has no {'code block' if which == 'all' else repr(which) + ' code block'}")
            return
        self.shell.set_next_input(code, replace=False)

    # ------------------------------------------------------------------ subcommands
    def _alias(self, text: str) -> Any:
        """``%mmsp alias`` lists the aliases; ``%mmsp alias NAME = SPEC`` names a model with its
        endpoint (``openai-chat:gpt-x --base-url URL --api-key-env NAME``); ``%mmsp alias NAME =``
        removes one."""
        settings = session().settings
        if not text.strip():
            return redact_value({name: alias.spec() for name, alias in settings.aliases.items()})
        name, eq, spec = text.partition("=")
        if not eq:
            raise UsageError("%mmsp alias: write %mmsp alias NAME = [CLIENT_TYPE:]MODEL [--base-url URL] "
                             "[--api-key-env NAME] ...")
        try:
            # {expr} and $name expand as in any magic's line, in each word of the spec on its own (a
            # value with spaces stays one value: --system {persona})
            try:
                spec = shlex.join(self._expand(word) for word in shlex.split(spec))
            except ValueError:  # (an unclosed quote: parse_alias says so)
                spec = self._expand(spec)
            name = self._expand(name.strip())
            known = name in settings.aliases
            settings.add_alias(name, spec.strip() or None)
        except OptionError as exc:
            raise UsageError(f"%mmsp alias: {exc}") from None
        if not spec.strip():  # a removal says what it did (a mistyped name removes nothing)
            print(f"removed alias {name}" if known else f"no alias {name} to remove")
        return None

    def _subcommand(self, args: Any, name: str, rest: list[str]) -> Any:
        sess = session()
        if name in ("history", "reset"):  # of the default conversation, --chat NAME's or NAME's
            if len(rest) > 1 or (rest and args.chat and rest[0] != args.chat):
                raise UsageError(f"%mmsp {name}: takes one conversation's name (or --chat NAME), not {' '.join(rest)!r}")
            chat = rest[0] if rest else args.chat
            try:
                if chat is not None:
                    check_chat_name(chat, "--chat" if args.chat is not None else "NAME")
            except OptionError as exc:
                raise UsageError(f"%mmsp {name}: {exc}") from None
            if chat and chat not in sess.conversations:
                known = ", ".join(sorted(sess.conversations)) or "none yet"
                raise UsageError(f"%mmsp {name}: no conversation named {chat!r} in this kernel (conversations: {known})")
            if name == "history":
                return history_frame(sess.conversation(chat).history())
            sess.conversation(chat).reset()
            print(f"conversation {chat or 'default'!r} cleared")
            return None
        if rest and name != "config":
            raise UsageError(f"%mmsp {name}: takes no arguments, not {' '.join(rest)!r}")
        if name == "help":
            print(self.mmsp.__doc__)
            return None
        if name == "models":
            return models_frame(sess.settings.aliases)
        if name == "config":
            if not rest:
                return sess.settings.as_dict()
            pairs = {}
            for pair in rest:
                key, eq, value = pair.partition("=")
                if not eq:
                    raise UsageError(f"%mmsp config: expected key=value, got {pair!r} (nothing was changed)")
                if any(k.replace("-", "_") == key.strip().replace("-", "_") for k in pairs):
                    raise UsageError(f"%mmsp config: {key.strip()} given twice: give each setting once "
                                     "(nothing was changed)")
                # a value expands {expr} and $name as an option's value does (-m {m}, --system {prompt})
                pairs[key.strip()] = self._expand(value.strip())
            try:  # all or nothing: every pair is checked before any takes effect
                sess.settings.update(pairs)
            except OptionError as exc:
                raise UsageError(f"%mmsp config: {exc} (nothing was changed)") from None
            return None
        if name == "usage":
            return usage_frame(sess.usage.rows())
        if name == "error":
            exc = sess.last_error
            if exc is None:
                print("no error in this kernel yet")
                return None
            detail = [f"{type(exc).__name__}: {exc}"]
            for key, value in sorted(vars(exc).items()):
                if not key.startswith("_"):
                    detail.append(f"  {key} = {value!r}")
            detail.append("".join(traceback.format_exception(exc)))
            print(redact("\n".join(detail)))
            return None
        if name == "alias":
            raise UsageError("%mmsp alias: takes no options: %mmsp alias [NAME = [CLIENT_TYPE:]MODEL --base-url URL ...]")
        raise UsageError(f"%mmsp: unknown subcommand {name!r}")


def _shown_short(exc: TurnError | Interrupted) -> None:
    """A strict turn's (or comparison's) error shown by IPython in one line under the banner, which
    already says what happened: the traceback through this package and mmsp's client adds nothing.
    The error itself is unchanged (``__cause__``, ``turn``); ``%mmsp error`` shows the whole detail
    of a turn that failed (a cancelled one has none). So is an interrupt, raised once the turn it
    stopped is drawn: the cell ends with an error (the cells queued after it do not run), in a line."""
    if isinstance(exc, Interrupted):
        said = f"Interrupted: {exc}"
        exc._render_traceback_ = lambda: [said]  # type: ignore[attr-defined]
        return
    turns = getattr(exc.turn, "turns", None) or [exc.turn]
    failed = any(getattr(turn, "status", None) in ("error", "incomplete") for turn in turns)
    line = f"TurnError: {exc}" + (" (the full detail: %mmsp error)" if failed else "")
    exc._render_traceback_ = lambda: [line]  # type: ignore[attr-defined]  # IPython's hook for this


def _parse(magic: Any, line: str, cell: bool = False) -> Any:
    """The magic's options from ``line``, with shell quoting; a line that does not parse as a shell
    line (an apostrophe in a one-line prompt) is split on spaces, as IPython does."""
    held, line = _hold_braces(line)
    try:
        argv = shlex.split(line)
    except ValueError:
        argv = None
    try:
        if argv is None:
            return _restored(parse_argstring(magic, line), held)
        return _restored(magic.parser.parse_args(argv), held)
    except UsageError as exc:
        said = f"{'%%mmsp' if cell else '%mmsp'}: {exc}"
        if "unrecognized arguments" in said:  # a mistyped option: the nearest one (--temprature)
            options = [o for action in magic.parser._actions for o in action.option_strings if o.startswith("--")]
            typed = [word.split("=")[0] for word in str(exc).partition(":")[2].split() if word.startswith("--")]
            near = [match for word in typed for match in difflib.get_close_matches(word, options, n=1)]
            if near:
                said += f"; did you mean {near[0]!r}?"
        if not cell and ("unrecognized arguments" in said or "ambiguous option" in said):
            # a one-line prompt that starts with a dash, e.g. %mmsp -verbose output please
            said += " (to send a prompt that starts with '-': %mmsp -- <prompt>)"
        raise UsageError(said) from None
    except Exception as exc:  # argparse's own complaints
        raise UsageError(f"{'%%mmsp' if cell else '%mmsp'}: {exc}") from None


def _hold_braces(line: str) -> tuple[list[str], str]:
    """``line`` with each ``{expr}`` holding a quote or a space put aside (a stand-in in its place),
    so that shell quoting leaves the expression whole: ``--system {d["a"]}`` is expanded as written,
    not as ``{d[a]}``; the expressions put aside, in order."""
    held: list[str] = []
    out: list[str] = []
    i = 0
    while i < len(line):
        if line[i] != "{":
            out.append(line[i])
            i += 1
            continue
        depth, j = 0, i
        while j < len(line):
            depth += {"{": 1, "}": -1}.get(line[j], 0)
            if depth == 0:
                break
            j += 1
        span = line[i : j + 1]
        if depth or not any(c in span for c in "'\" \t"):  # (unclosed, or nothing shlex would change)
            out.append(line[i])
            i += 1
            continue
        out.append(f"\0{len(held)}\0")
        held.append(span)
        i = j + 1
    return held, "".join(out)


def _restored(args: Any, held: list[str]) -> Any:
    """The options parsed with every expression :func:`_hold_braces` put aside back in its place."""
    if not held:
        return args

    def back(value: Any) -> Any:
        if isinstance(value, str) and "\0" in value:
            return re.sub(r"\0(\d+)\0", lambda m: held[int(m.group(1))], value)
        if isinstance(value, list):
            return [back(v) for v in value]
        return value

    for key, value in vars(args).items():
        setattr(args, key, back(value))
    return args


#: a word of a shell line as shlex.split reads it: unquoted runs, '...', "..." and escapes
_WORD = re.compile(r"""(?:[^\s'"\\]+|'[^']*'|"(?:[^"\\]|\\.)*"|\\.)+""", re.S)


def _prompt_of(line: str, rest: list[str]) -> str:
    """A one-line prompt as typed on ``line``: its quotes, backslashes and spaces kept (``What does
    "idempotent" mean``, ``{d["a"]}``), as a cell's prompt keeps them; its words as parsed when the
    line's words cannot be lined up with them."""
    try:
        argv = shlex.split(line)
    except ValueError:  # (parsed as IPython splits a line, quotes kept)
        return " ".join(rest)
    spans = [m.span() for m in _WORD.finditer(line)]
    if len(spans) == len(argv):
        for i in range(len(argv) - len(rest), -1, -1):
            if argv[i:i + len(rest)] == rest:
                return line[spans[i][0]:spans[i + len(rest) - 1][1]]
    return " ".join(rest)


_QUESTION = re.compile(r"^(\s*)(?:([A-Za-z_][\w.]*)\s*=\s*)?%mmsp(\s+.*\S)\?(\s*)$")
#: ``x = %mmsp ...``: the line's value is assigned (the turn, not None)
_ASSIGN = re.compile(r"^(\s*)([A-Za-z_][\w.]*)\s*=\s*%mmsp(\s+.*\S)?\s*$")


def questions_are_prompts(lines: list[str]) -> list[str]:
    """An input transformer: ``%mmsp What is my name?`` is a prompt, not IPython's help syntax, and
    ``x = %mmsp a prompt`` gives ``x`` the turn (``--value``).

    IPython reads a line that ends in ``?`` as a request for help on the word before it; a one-line
    ``%mmsp`` prompt ending in a question mark is turned into the call IPython would have made.
    ``%mmsp?`` (help on the magic itself) is left alone.
    """
    if lines and lines[0].lstrip().startswith("%%"):
        return lines  # a cell magic's body is its own text
    if any(line.rstrip("\n").endswith("\\") for line in lines) or any('"""' in line or "'''" in line for line in lines):
        return lines  # a line continued, or a string over lines: left to IPython, as written
    out = []
    for line in lines:
        body, newline = line.rstrip("\n"), "\n" if line.endswith("\n") else ""
        if (m := _QUESTION.match(body)) is not None and not m.group(3).strip().startswith("?"):
            indent, target, rest = m.group(1), m.group(2), m.group(3).strip() + "?"
        elif (m := _ASSIGN.match(body)) is not None and not (m.group(3) or "").strip().startswith("?"):
            indent, target, rest = m.group(1), m.group(2), (m.group(3) or "").strip()
        else:
            out.append(line)
            continue
        if target:  # the turn is the line's value
            rest = "--value " + rest
        assign = f"{target} = " if target else ""
        out.append(f"{indent}{assign}get_ipython().run_line_magic('mmsp', {rest!r}){newline}")
    return out


def load_ipython_extension(ipython: Any) -> None:
    from ..views import static, wire

    ipython.register_magics(MMSPMagics)
    static.register_formatters(ipython)  # a Turn or a Wire as a cell's value: shown through the views
    wire.register_formatters(ipython)
    record_errors(ipython)  # failed cells become {Err} and %mmsp fix
    if questions_are_prompts not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(questions_are_prompts)
    settings = session().settings  # the first turn's imports, ahead (see front/warm.py)
    warm_up(settings.model, settings.client_type, settings.base_url)
    try:  # and the widget's, here on the main thread (see front/warm.py): the turn's then imports nothing
        from ..views import widget  # noqa: F401
    except Exception:  # (the turn that needs it says why)
        pass


def unload_ipython_extension(ipython: Any) -> None:
    # the magics go with the rest: half of them (no {Err}, a question as IPython's help) would stay
    magics = ipython.magics_manager
    for kind in ("line", "cell"):
        magics.magics[kind].pop("mmsp", None)
    magics.registry.pop(MMSPMagics.__name__, None)
    if questions_are_prompts in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(questions_are_prompts)
    forget_errors(ipython)
    session().close()  # the demo model server and the wire proxies
