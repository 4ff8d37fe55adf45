"""The one check of an on/off option (``core/flags.py``), used by every door."""

from __future__ import annotations

import numpy as np
import pytest

from mmsp_notebook import OptionTypeError
from mmsp_notebook.core.flags import check_flag, is_flag


def test_a_flag_is_a_bool_0_1_or_numpys_bool_and_nothing_else() -> None:
    assert all(is_flag(v) for v in (True, False, 0, 1, np.bool_(True), np.False_))
    assert not any(is_flag(v) for v in ("false", "", 2, -1, 1.0, None, [True], np.array([True, False])))


def test_none_is_taken_where_it_means_something_and_named_in_the_error() -> None:
    check_flag("wire", None)
    check_flag("strict", None, none="the kernel's setting", door="ask")
    with pytest.raises(OptionTypeError, match=r"^otel takes True or False, not NoneType None$"):
        check_flag("otel", None, none=None)
    with pytest.raises(OptionTypeError, match=r"^ask: strict takes True or False \(None: the kernel's setting\), "
                                              r"not str 'false'$"):
        check_flag("strict", "false", none="the kernel's setting", door="ask")
    with pytest.raises(OptionTypeError, match=r"^wire takes True or False, not str '\[redacted\]'$"):
        check_flag("wire", "sk-" + "a" * 40)
