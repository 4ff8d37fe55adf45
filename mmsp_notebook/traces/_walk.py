"""One walk of a trace directory: every real directory visited once, nothing opened but directories.

``glob.glob(root + "/**/*.json", recursive=True)`` follows links to directories on every path that
reaches them, so two link loops in one tree (``ln -s .. t/sub/loop; ln -s . t/self``) make it
enumerate an exponential number of paths and never finish. Here the tree is walked breadth first
with :func:`os.scandir`, entering each real directory (device + inode) once, under the first path
that reaches it (a shortest one); the glob pattern is then matched against the relative paths
found, with :mod:`glob`'s rules: ``*``, ``?`` and ``[...]`` stay within one path part, ``**`` spans
any number of parts, and wildcards match no name that starts with a dot (hidden files and
directories), as glob's defaults do.

A directory that cannot be listed is reported, not raised. Files are not opened, nor stat'ed: a
FIFO, a device or a dangling link found here is a candidate like any file, and the trace store
(:func:`mmsp_notebook.core.store.read_trace`) says what it is when the loader reads it.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from .._errors import OptionError

__all__ = ["Pattern", "walk_dirs", "list_dir"]

_NAME = attrgetter("name")


def _part_regex(part: str) -> str:
    """The regex of one path part of a glob pattern (wildcards do not cross ``/``)."""
    out: list[str] = [] if part.startswith(".") else [r"(?!\.)"]  # glob: wildcards skip hidden names
    i, n = 0, len(part)
    while i < n:
        c = part[i]
        i += 1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i
            if j < n and part[j] == "!":
                j += 1
            if j < n and part[j] == "]":
                j += 1
            while j < n and part[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal "["
                out.append(r"\[")
                continue
            body = part[i:j].replace("\\", "\\\\")
            i = j + 1
            if body.startswith("!"):
                body = "^" + body[1:]
            elif body.startswith("^"):
                body = "\\" + body
            out.append(f"(?!/)[{body}]")
        else:
            out.append(re.escape(c))
    return "".join(out)


@dataclass(frozen=True)
class Pattern:
    """A glob pattern relative to a directory, compiled once for matching relative paths."""

    text: str
    regex: re.Pattern[str] = field(init=False, repr=False)
    #: path parts at most (None with ``**``): the walk goes no deeper
    depth: int | None = field(init=False)
    #: whether hidden directories can match (a part of the pattern starts with a dot)
    hidden: bool = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise OptionError(f"pattern takes a glob relative to the directory (like '**/*.json'), not {self.text!r}")
        text = self.text.replace(os.sep, "/") if os.sep != "/" else self.text
        parts = text.split("/")
        if not text or text.startswith("/") or ".." in parts or os.path.isabs(self.text):
            raise OptionError(f"pattern {self.text!r}: a glob relative to the directory is expected (like '**/*.json')")
        parts = [p for p in parts if p not in ("", ".")]
        rx: list[str] = []
        for k, part in enumerate(parts):
            last = k == len(parts) - 1
            if part == "**":
                rx.append(r"(?:(?!\.)[^/]+/)*(?!\.)[^/]+" if last else r"(?:(?!\.)[^/]+/)*")
            else:
                rx.append(_part_regex(part) + ("" if last else "/"))
        object.__setattr__(self, "regex", re.compile("".join(rx) + r"\Z", re.DOTALL))
        object.__setattr__(self, "depth", None if "**" in parts else len(parts))
        object.__setattr__(self, "hidden", any(p.startswith(".") for p in parts))

    def matcher(self) -> Callable[[str], Any]:
        """A function telling whether a relative path (``/``-separated) matches (truthy): for the
        usual ``**/*<suffix>`` a suffix test and a hidden-part test, else the regex."""
        head, _, suffix = self.text.partition("**/*")
        if not head and suffix and not any(c in suffix for c in "*?[/"):
            return lambda rel: rel.endswith(suffix) and rel[0] != "." and "/." not in rel
        return self.regex.match

    def match(self, rel: str) -> bool:
        """Whether a relative path (``/``-separated) matches."""
        return self.regex.match(rel) is not None


def walk_dirs(root: str, pattern: Pattern, problems: list[dict[str, str]],
              entered: set[tuple[int, int]] | None = None) -> Iterator[tuple[list[str], set[str]]]:
    """The entries of each directory under ``root`` that are not directories, one directory at a
    time (breadth first, each name-sorted), with those the listing says are regular files; the
    directories that could not be listed are appended to ``problems``.

    Each real directory (by device and inode) is entered once: a link to a directory already
    seen (a loop, or a second way into the same tree) is not followed again. The walk goes no
    deeper than the pattern can match, and into hidden directories only when a part of the
    pattern starts with a dot. Only directories are held while walking, not the files found.
    ``entered``: the directories walks before this one entered (shared by the walks of the paths
    of one load, so that a tree given twice, or through a link, is read once).
    """
    try:
        st = os.stat(root)
    except OSError as exc:
        problems.append({"path": root, "reason": _unlisted(exc)})
        return
    seen = entered if entered is not None else set()
    if (st.st_dev, st.st_ino) in seen:
        return
    seen.add((st.st_dev, st.st_ino))
    queue: deque[tuple[str, int]] = deque([(root, 1)])
    max_depth, hidden = pattern.depth, pattern.hidden
    while queue:
        d, depth = queue.popleft()
        try:
            files, regular, dirs = list_dir(d)
        except OSError as exc:
            problems.append({"path": d, "reason": _unlisted(exc)})
            continue
        deeper = max_depth is None or depth < max_depth
        for e in dirs:
            if not deeper or (not hidden and e.name.startswith(".")):
                continue
            try:
                s = e.stat()
            except OSError as exc:
                problems.append({"path": e.path, "reason": _unlisted(exc)})
                continue
            key = (s.st_dev, s.st_ino)
            if key not in seen:
                seen.add(key)
                queue.append((e.path, depth + 1))
        if files:
            yield files, regular


def list_dir(d: str) -> tuple[list[str], set[str], list[os.DirEntry[str]]]:
    """One directory's entries, name-sorted: those that are not directories (links to none
    included), those of them the listing says are regular files, and the directories (links to
    one included). Raises ``OSError`` when it cannot be listed."""
    with os.scandir(d) as it:
        entries = sorted(it, key=_NAME)
    files: list[str] = []
    regular: set[str] = set()
    dirs: list[os.DirEntry[str]] = []
    for e in entries:
        try:
            if e.is_file(follow_symlinks=False):  # the common case, known from the listing
                files.append(e.path)
                regular.add(e.path)
                continue
            is_dir = e.is_dir()  # follows a link
        except OSError:  # a link in a loop of links (ELOOP): reading it will say so
            is_dir = False
        if is_dir:
            dirs.append(e)
        else:
            files.append(e.path)
    return files, regular, dirs


def _unlisted(exc: OSError) -> str:
    return f"unreadable directory: {exc.__class__.__name__}: {exc.strerror or exc}"
