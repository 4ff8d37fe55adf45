"""Model options, parsed and checked once.

Every way of giving an option goes through :func:`check_option`: the magic's arguments
(``--temperature 0.2``), ``%mmsp config temperature=0.2``, ``ask(..., temperature=0.2)`` and
``Chat(temperature=0.2)``. A value may be text (a magic line, a config pair) or a Python value; the
result is the parsed value or an :class:`~mmsp_notebook.OptionError` that names the option and what it
takes, so the same mistake gets the same answer through every door.

:class:`TurnOptions` is what one turn asks for (``None`` = not given); :class:`Settings` holds the
kernel's defaults for the same options plus the kernel-wide switches. A turn's options are its own
over the kernel's defaults (:meth:`TurnOptions.over`).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import os
import re
import shlex
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from .._errors import DemoServerError, OptionError
from ..core.chars import refuse_lone_surrogate
from ..core.redact import redact, redact_value

__all__ = ["THINKING_LEVELS", "DEFAULT_TIMEOUT", "DEMO_BASES", "TurnOptions", "Settings", "Once", "OnceFlag",
           "check_option", "check_client_type", "parse_alias", "idle_limit", "is_demo_model", "provide_demo_model_check"]

THINKING_LEVELS = ("none", "low", "medium", "high", "xhigh", "max")
_NONE_WORDS = ("none", "null", "")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def check_client_type(client_type: str) -> None:
    """Refuse a client type mmsp does not know, naming those it does."""
    from mmsp.credentials import COMPATIBLE_CLIENT_TYPES, OFFICIAL_CLIENT_TYPES

    known = (*OFFICIAL_CLIENT_TYPES, *COMPATIBLE_CLIENT_TYPES)
    if client_type not in known:
        raise OptionError(f"unknown client type {client_type!r}; mmsp has {', '.join(known)}")


#: the models the project's own demo server serves: a name is one of them and ``+option`` parts
DEMO_BASES = ("demo", "demo-embed")


def is_demo_model(model: str) -> bool:
    return model.split("+", 1)[0] in DEMO_BASES


#: reads a demo model's name and raises ``DemoServerError`` for a bad one (``demo+tps=abc``)
_demo_model_check: Callable[[str], Any] | None = None


def provide_demo_model_check(check: Callable[[str], Any]) -> None:
    """Name what reads a demo model's name (``mmsp_notebook.demo.parse_model``), so that a bad one is
    refused where the model is given, as any bad option value is, not at every turn that uses it.

    The engine does not import the demo package (a layer rule): the package's ``__init__`` provides it.
    """
    global _demo_model_check
    _demo_model_check = check


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise OptionError(f"{name} takes text, not {type(value).__name__}")
    refuse_lone_surrogate(name, value)
    return value


def _model(name: str, value: Any) -> str:
    value = _text(name, value).strip()
    if not value:
        raise OptionError(f"{name} takes a model id (e.g. 'demo', or one of %mmsp models)")
    if "," in value:  # every turn would fail: no model id has a comma
        raise OptionError(f"{name} takes one model id, not {value!r}: to compare models, give the list to "
                          "%%mmsp -m a,b or compare(prompt, 'a,b')")
    if _demo_model_check is not None and is_demo_model(value):
        try:
            _demo_model_check(value)
        except DemoServerError as exc:  # (demo+tps=abc: every turn on it would fail)
            raise OptionError(str(exc)) from None
    return value


def _client_type(name: str, value: Any) -> str:
    value = _text(name, value).strip()
    check_client_type(value)
    return value


def _url(name: str, value: Any) -> str:
    """An http(s) URL with a host (a provider's endpoint); anything else is refused before a request."""
    value = _text(name, value).strip()
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (a port that is no number raises ValueError)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname) and not re.search(r"\s", value)
    except ValueError:
        ok = False
    if not ok:
        raise OptionError(f"{name} takes an http:// or https:// URL with a host (e.g. http://localhost:8000/v1), "
                          f"not {redact(value)[:200]!r}")
    return value


def _env_name(name: str, value: Any) -> str:
    value = _text(name, value).strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        # the value is not echoed: it may be the key itself, given by mistake
        raise OptionError(f"{name} takes the name of an environment variable holding the key (letters, digits "
                          "and _), never the key itself")
    return value


def _thinking(name: str, value: Any) -> str:
    if value not in THINKING_LEVELS:
        raise OptionError(f"{name} takes one of {', '.join(THINKING_LEVELS)}, not {value!r}")
    return str(value)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise OptionError(f"{name} takes a whole number, not {value!r}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise OptionError(f"{name} takes a whole number, not {value!r}") from None
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise OptionError(f"{name} takes a whole number, not {value!r}")
    if value < 1:
        raise OptionError(f"{name} must be at least 1, not {value}")
    return value


def _temperature(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise OptionError(f"{name} takes a number, not {value!r}")
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise OptionError(f"{name} takes a number, not {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise OptionError(f"{name} must be a finite number of at least 0, not {value!r}")
    return number


#: The idle timeout of a turn when none is configured: seconds without a byte or an event.
DEFAULT_TIMEOUT = 120.0
_NO_LIMIT = ("none", "off", "never", "inf", "infinity")


def _timeout(name: str, value: Any) -> float:
    """Seconds (a number above 0, ``"30s"`` too); ``none``/``off``/``inf`` for no limit (``math.inf``)."""
    problem = f"{name} takes a number of seconds above 0, or none for no limit, not {value!r}"
    if isinstance(value, bool):
        raise OptionError(problem)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _NO_LIMIT:
            return math.inf
        word = word[:-1].strip() if word.endswith("s") else word
        try:
            value = float(word)
        except ValueError:
            raise OptionError(problem) from None
    if not isinstance(value, (int, float)) or math.isnan(value) or value <= 0:
        raise OptionError(problem)
    return float(value)


def idle_limit(timeout: float | None) -> float | None:
    """The idle timeout a turn runs with: ``None`` (no limit) for ``None`` or infinity, else the seconds."""
    return None if timeout is None or math.isinf(timeout) else float(timeout)


def _switch(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise OptionError(f"{name} takes true or false, not {value!r}")


# option -> (parser, may be None)
_CHECKS: dict[str, tuple[Callable[[str, Any], Any], bool]] = {
    "model": (_model, False),
    "client_type": (_client_type, True),
    "base_url": (_url, True),
    "api_key_env": (_env_name, True),
    "system": (_text, True),
    "thinking": (_thinking, True),
    "max_tokens": (_count, True),
    "temperature": (_temperature, True),
    "max_steps": (_count, False),
    "timeout": (_timeout, True),
    "trace": (_switch, False),
    "strict": (_switch, False),
    "events": (_switch, False),
    "demo_instant": (_switch, False),
}


def check_option(name: str, value: Any, *, text: bool = False) -> Any:
    """``value`` of option ``name`` parsed and checked; ``None`` stays ``None`` where the option may be unset.

    With ``text=True`` (a config pair) the words ``none``/``null`` and an empty value mean unset.
    """
    key = name.replace("-", "_")
    if key not in _CHECKS:
        raise OptionError(f"unknown option {name!r}; options: {', '.join(sorted(_CHECKS))}")
    parse, optional = _CHECKS[key]
    if value is None or (text and isinstance(value, str) and value.strip().lower() in _NONE_WORDS):
        if not optional:
            raise OptionError(f"{key} cannot be empty")
        return None
    try:
        return parse(key, value)
    except OptionError as exc:  # it may quote the value: a key pasted there by mistake is not echoed
        said = redact(str(exc))
        if said == str(exc):
            raise
        raise type(exc)(said) from None


def _shown_repr(options: Any) -> str:
    """The repr of a dataclass of options with every string in it redacted (a URL's password or a key
    in its query, in ``base_url``): a repr shows up in tracebacks, logs and a cell's value."""
    fields = (f"{f.name}={redact_value(getattr(options, f.name))!r}" for f in dataclasses.fields(options) if f.repr)
    return f"{type(options).__name__}({', '.join(fields)})"


@dataclasses.dataclass(frozen=True)
class TurnOptions:
    """The model options of one turn, each checked; ``None`` where not given."""

    model: str | None = None
    client_type: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    system: str | None = None
    thinking: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    max_steps: int | None = None
    timeout: float | None = None  # idle seconds; math.inf: no limit

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                object.__setattr__(self, f.name, check_option(f.name, value))

    def __repr__(self) -> str:
        return _shown_repr(self)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def over(self, defaults: Settings) -> TurnOptions:
        """These options, each one not given taken from the kernel's defaults."""
        return dataclasses.replace(self, **{name: getattr(defaults, name) for name in self.names()
                                             if getattr(self, name) is None})

    def resolve(self, settings: Settings) -> TurnOptions:
        """The options a turn runs with: an alias as model brings its own options (each one given here
        still wins), then the kernel's defaults fill in what is left."""
        alias = settings.aliases.get(self.model or settings.model)
        opts = self
        if alias is not None:
            opts = dataclasses.replace(self, model=alias.model, **{
                name: getattr(alias, name) for name in self.names()
                if name != "model" and getattr(self, name) is None and getattr(alias, name) is not None})
        return opts.over(settings)

    def spec(self) -> str:
        """These options written as an alias spec (what :func:`parse_alias` reads)."""
        parts = [shlex.quote(self.model or "")]
        for name in self.names():
            value = getattr(self, name)
            if name != "model" and value is not None:
                parts += ["--" + name.replace("_", "-"), shlex.quote(str(value))]
        return " ".join(parts)

    def config(self, *, tools: Any = None, trace_id: str | None = None) -> dict[str, Any]:
        """The UniConfig of a turn with these options."""
        config: dict[str, Any] = {}
        if self.system:
            config["system_prompt"] = self.system
        if self.thinking:
            config["thinking_level"] = self.thinking
        if self.max_tokens is not None:
            config["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            config["temperature"] = self.temperature
        if tools:
            config["tools"] = tools.schemas
        if trace_id:
            config["trace_id"] = trace_id
        return config


@dataclasses.dataclass
class Settings:
    """Defaults for this kernel (``%mmsp config key=value``): every model option plus the kernel-wide switches."""

    model: str = dataclasses.field(default_factory=lambda: os.getenv("MMSP_NOTEBOOK_MODEL") or "demo")
    client_type: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    system: str | None = None
    thinking: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    max_steps: int = 8
    timeout: float | None = DEFAULT_TIMEOUT  # idle seconds; None (or math.inf): no limit
    trace: bool = True
    strict: bool = False
    events: bool = False
    demo_instant: bool = dataclasses.field(default_factory=lambda: os.getenv("MMSP_NOTEBOOK_DEMO_INSTANT", "") == "1")
    # model aliases: a name standing for a model with its endpoint (%mmsp alias, or MMSPMagics.aliases)
    aliases: dict[str, TurnOptions] = dataclasses.field(default_factory=dict)
    # where each value came from, for the precedence %mmsp config > IPython configuration > environment
    origin: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return _shown_repr(self)

    @staticmethod
    def option_names() -> tuple[str, ...]:
        return tuple(name for name in _CHECKS)

    def set(self, key: str, value: Any) -> None:
        """Set one default from text (``%mmsp config``) or a Python value, checked as the option is everywhere."""
        name = key.replace("-", "_")
        if name not in _CHECKS:
            raise OptionError(f"unknown setting {key!r}; settings: {', '.join(sorted(_CHECKS))}")
        setattr(self, name, check_option(name, value, text=True))
        self.origin[name] = "config"

    def update(self, pairs: dict[str, Any]) -> None:
        """Set several defaults, all or nothing: each value is checked before any takes effect."""
        trial = copy.deepcopy(self)
        for key, value in pairs.items():
            trial.set(key, value)
        self.__dict__.update(trial.__dict__)

    def configure(self, values: dict[str, Any]) -> list[str]:
        """Defaults from IPython's configuration system (``c.MMSPMagics.model = ...``), all or nothing.

        They rank below what ``%mmsp config`` set in this kernel and above the environment
        (``MMSP_NOTEBOOK_MODEL``). Returns the names that took effect.
        """
        checked = {name.replace("-", "_"): check_option(name, value) for name, value in values.items()
                   if value is not None}
        taken = []
        for name, value in checked.items():
            if self.origin.get(name) != "config":
                setattr(self, name, value)
                self.origin[name] = "ipython-config"
                taken.append(name)
        return taken

    def as_dict(self) -> dict[str, Any]:
        """The current defaults (what ``%mmsp config`` shows), keys redacted (a URL's password...)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _CHECKS}
        if self.aliases:
            out["aliases"] = {name: alias.spec() for name, alias in self.aliases.items()}
        return redact_value(out)

    def add_alias(self, name: str, spec: str | TurnOptions | None) -> None:
        """Name a model with its endpoint; ``spec=None`` (or empty) removes the alias."""
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.+-]*", name or ""):
            raise OptionError(f"an alias is a name of letters, digits, _ . + - (starting with a letter), not {name!r}")
        if spec is None or (isinstance(spec, str) and not spec.strip()):
            self.aliases.pop(name, None)
            return
        hidden = _model_named(name)
        if hidden:  # (it would change every turn on that model, and %mmsp models would list the name twice)
            raise OptionError(f"alias {name!r}: {name!r} names {hidden}: an alias by that name would take its place "
                              f"in every turn; name the alias otherwise (e.g. my-{name})")
        alias = spec if isinstance(spec, TurnOptions) else parse_alias(spec)
        if alias.model == name:
            raise OptionError(f"alias {name!r}: an alias cannot name itself; name the model it stands for")
        if alias.model in self.aliases:
            raise OptionError(f"alias {name!r} names another alias ({alias.model!r}); name the model itself")
        self.aliases[name] = alias


def _model_named(name: str) -> str:
    """What a model of that name is, when one is served by the demo server or known to mmsp; else ``""``."""
    if is_demo_model(name):
        return f"a demo model ({', '.join(DEMO_BASES)}, with +options)"
    from mmsp import list_supported_models

    if any(entry.get("model") == name for entry in list_supported_models()):
        return "a model mmsp knows (see %mmsp models)"
    return ""


def _given_before(action: argparse.Action, namespace: argparse.Namespace, value: Any) -> None:
    """Refuse an option given a second time: the last one silently winning would drop the first."""
    before = getattr(namespace, action.dest, action.default)
    if before is action.default:
        return
    said = "given twice"
    if action.nargs != 0:
        said += f" ({_clip(before)}, then {_clip(value)})"
    said += ": give it once"
    if action.dest == "model":
        said += "; to compare models, give them as one list: -m a,b"
    raise argparse.ArgumentError(action, said)


def _clip(value: Any, limit: int = 60) -> str:
    text = redact(repr(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Once(argparse.Action):
    """An option that stores its value and may be given once: a second one is refused with an
    ``argparse.ArgumentError`` naming the option (no option of the magic or of an alias repeats)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        _given_before(self, namespace, values)
        setattr(namespace, self.dest, values)


class OnceFlag(argparse.Action):
    """A flag (``store_true``) that may be given once, as :class:`Once`."""

    def __init__(self, option_strings: list[str], dest: str, default: bool = False, required: bool = False,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, const=True, default=default, required=required, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        _given_before(self, namespace, True)
        setattr(namespace, self.dest, True)


def _alias_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="alias", add_help=False, exit_on_error=False)
    parser.add_argument("model")
    for name in TurnOptions.names():
        if name != "model":
            parser.add_argument("--" + name.replace("_", "-"), dest=name, default=None, action=Once)
    return parser


def parse_alias(spec: str) -> TurnOptions:
    """``[CLIENT_TYPE:]MODEL [--client-type T] [--base-url URL] [--api-key-env NAME] [--system ...] ...``

    The options are the magic's model options, checked as everywhere. ``openai-chat:gpt-x`` is model
    ``gpt-x`` through client type ``openai-chat`` (only when the prefix is a client type mmsp knows:
    model ids such as ``llama3:8b`` keep their colon).
    """
    try:
        argv = shlex.split(spec)
        # (known args first: argparse prints its usage to stderr for an unknown one, even told not to exit)
        args, unknown = _alias_parser().parse_known_args(argv)
    except (ValueError, argparse.ArgumentError) as exc:
        raise OptionError(f"alias: {exc}; write [CLIENT_TYPE:]MODEL [--base-url URL] [--api-key-env NAME] ...") from None
    except SystemExit:  # argparse gives up this way on some errors even with exit_on_error=False
        raise OptionError("alias: write [CLIENT_TYPE:]MODEL [--base-url URL] [--api-key-env NAME] ...") from None
    if unknown:
        raise OptionError(f"alias: unexpected {redact(' '.join(unknown))!r}; write [CLIENT_TYPE:]MODEL [--base-url URL] "
                          "[--api-key-env NAME] [--system ...] ...")
    values = {k: v for k, v in vars(args).items() if v is not None}
    prefix, colon, rest = values["model"].partition(":")
    if colon:
        try:
            check_client_type(prefix)
        except OptionError:
            pass
        else:
            if not rest.strip():
                raise OptionError(f"alias: a model id goes after {values['model']!r} ({prefix}:MODEL)")
            if values.get("client_type") is None:
                values["client_type"], values["model"] = prefix, rest
    return TurnOptions(**values)
