"""How a stream's end is told from the error its client raised (``core/endings.py``)."""

from __future__ import annotations

import json

import pytest

from mmsp_notebook.core.endings import frame_cut_off


def _decode_error(doc: str) -> json.JSONDecodeError:
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads(doc)
    return caught.value


@pytest.mark.parametrize("doc", ["[", "[D", "[DO", "[DON", "[DONE", '{"role": "assis', '{"text": "ab'])
def test_a_frame_cut_inside_its_json_or_inside_the_closing_done_is_cut_off(doc):
    # (a cut inside "data: [DONE]" was read as a frame of another protocol: an error, "check --client-type")
    assert frame_cut_off(_decode_error(doc))


@pytest.mark.parametrize("doc", ["<html>", "DONE", "[DONE]x", "nonsense", "[1, x]"])
def test_a_frame_that_is_no_json_at_all_is_not_cut_off(doc):
    assert not frame_cut_off(_decode_error(doc))
