"""Model text as Markdown: sanitized HTML, with TeX math as MathML.

markdown-it-py renders it with raw HTML disabled (raw HTML shows as text), an image is its alt text
(never loaded), then nh3 keeps the elements and attributes below and nothing else. TeX math becomes
MathML, which browsers lay out themselves (MathML Core: no fonts, no stylesheet). The delimiters and
their rules are those of the live view (``js/src/math.js``: the same regular expressions), built
with the rule functions of ``mdit_py_plugins.texmath``, the port of the plugin the live view uses:

* inline ``$…$`` (no space after the opening ``$``, none before the closing one, no ``$`` inside,
  not right after a backslash or a digit, no digit right after: "$5 and $10" stays text),
  ``$$…$$`` inside a paragraph (display), ``\\(…\\)``;
* a block ``$$…$$`` or ``\\[…\\]`` that starts a block and ends its line.

Code spans and blocks keep their dollars. latex2mathml converts the TeX; a formula it cannot
convert shows its source, delimiters included, escaped. The MathML passes nh3 with the rest:
``MATH_TAGS`` and ``MATH_ATTRS`` only, so no ``href`` (latex2mathml turns ``\\href`` into one), no
``maction``, no ``annotation-xml``, no event handler, no style.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..core.chars import mend_surrogates

__all__ = ["render_markdown", "render_math", "sanitize", "MATH_TAGS", "MATH_ATTRS"]

_HTML_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "strong", "em", "code", "pre",
    "blockquote", "table", "thead", "tbody", "tr", "th", "td", "a", "del", "s", "sup", "sub", "span",
}
#: The MathML of TeX (as js/src/markdown.js allows it)
MATH_TAGS = frozenset({
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msup", "msub", "msubsup", "mfrac", "msqrt",
    "mroot", "mtable", "mtr", "mtd", "mover", "munder", "munderover", "mstyle", "mpadded", "mphantom", "menclose",
})
MATH_ATTRS = frozenset({
    "display", "displaystyle", "scriptlevel", "mathvariant", "stretchy", "fence", "separator", "symmetric",
    "largeop", "movablelimits", "form", "lspace", "rspace", "minsize", "maxsize", "accent", "accentunder",
    "columnalign", "rowalign", "columnspacing", "rowspacing", "columnlines", "rowlines", "frame",
    "framespacing", "equalrows", "equalcolumns", "width", "height", "depth", "voffset", "linethickness",
    "notation",
})
_ATTRIBUTES = {
    "a": {"href", "title"}, "code": {"class"}, "th": {"style"}, "td": {"style"}, "ol": {"start"},
    **{tag: set(MATH_ATTRS) for tag in MATH_TAGS},
}

_CLOSE = {"$": "$", "$$": "$$", "\\(": "\\)", "\\[": "\\]"}
#: TeX longer than this is shown as its source (latex2mathml's time grows with it)
MAX_TEX = 20_000


def _rules() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from mdit_py_plugins.texmath.index import dollar_post, dollar_pre

    dollar = {"pre": dollar_pre, "post": dollar_post}
    inline = [
        {"name": "math_inline_double", "rex": re.compile(r"\$\$([^$]*?[^$\\])\$\$"), "tag": "$$", **dollar},
        {"name": "math_inline", "rex": re.compile(r"\$([^$\s\\]|[^$\s][^$]*?[^$\s\\])\$"), "tag": "$", **dollar},
        {"name": "math_inline_paren", "rex": re.compile(r"\\\(((?:[^\\]|\\[^()])+?)\\\)"), "tag": "\\("},
    ]
    block = [
        {"name": "math_block", "rex": re.compile(r"\$\$([^$]*?[^$\\])\$\$[ \t]*(?=\n|\Z)"), "tag": "$$"},
        {"name": "math_block_bracket", "rex": re.compile(r"\\\[((?:[^\\]|\\[^\[\]])+?)\\\][ \t]*(?=\n|\Z)"),
         "tag": "\\["},
    ]
    return inline, block


@lru_cache(maxsize=4096)  # (a long answer repeats its formulas: each converted once)
def render_math(tex: str, display: bool, open_: str) -> str:
    """The MathML of ``tex``, or its source (with ``open_`` and its closer) escaped when it cannot be converted."""
    from markdown_it.common.utils import escapeHtml

    if len(tex) <= MAX_TEX:
        try:
            from latex2mathml.converter import convert

            return convert(tex, display="block" if display else "inline")
        except Exception:  # any failure of the converter shows the source instead
            pass
    return f'<span class="mmsp-math-error">{escapeHtml(open_ + tex + _CLOSE[open_])}</span>'


@lru_cache(maxsize=1)
def _md():
    from markdown_it import MarkdownIt
    from markdown_it.common.utils import escapeHtml
    from mdit_py_plugins.texmath.index import make_block_func, make_inline_func

    # "commonmark" with tables and strikethrough; html=False renders raw HTML as text; an image is
    # its alt text, never loaded (as the live view draws it: js/src/markdown.js)
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    md.add_render_rule("image", lambda self, tokens, idx, options, env:
                       escapeHtml(self.renderInlineAsText(tokens[idx].children or [], options, env)))
    inline, block = _rules()
    for rule in inline:
        md.inline.ruler.before("escape", rule["name"], make_inline_func(rule))  # type: ignore[arg-type]
        display = rule["tag"] == "$$"
        md.add_render_rule(rule["name"], lambda self, tokens, idx, options, env, d=display:
                           render_math(tokens[idx].content, d, tokens[idx].markup))
    for rule in block:
        md.block.ruler.before("fence", rule["name"], _in_quotes(make_block_func(rule)))  # type: ignore[arg-type]
        md.add_render_rule(rule["name"], _render_block)
    return md


_QUOTE_MARKS = re.compile(r"(\n*?^(?:\s*>)+)", re.MULTILINE)


def _in_quotes(rule: Any) -> Any:
    """A block rule whose formula, in a blockquote, loses the quote marks of its lines (as in the live view)."""
    def block(state: Any, begin: int, end: int, silent: bool) -> bool:
        found = bool(rule(state, begin, end, silent))
        if found and not silent and state.parentType == "blockquote":
            state.tokens[-1].content = _QUOTE_MARKS.sub("", state.tokens[-1].content)
        return found

    return block


def _render_block(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    out = render_math(tokens[idx].content, True, tokens[idx].markup)
    return (out if out.startswith("<math") else f"<p>{out}</p>") + "\n"


def sanitize(markup: str) -> str:
    """HTML cut down to what Markdown and its math render to (no script, no event handlers, http(s)/mailto links)."""
    import nh3

    return nh3.clean(
        markup,
        tags=_HTML_TAGS | MATH_TAGS,
        clean_content_tags={"script", "style", "annotation-xml", "annotation"},
        attributes=_ATTRIBUTES,
        allowed_classes={"span": {"mmsp-math-error"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def render_markdown(text: str) -> str:
    """Markdown → sanitized HTML, TeX math as MathML (a lone surrogate a model sent as U+FFFD)."""
    return sanitize(_md().render(mend_surrogates(text or "")))
