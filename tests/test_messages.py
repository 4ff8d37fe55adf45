"""UniMessages given by hand: a prompt message to ask, a chat's history."""

from __future__ import annotations

import io

import pytest

import mmsp_notebook as mn
from mmsp_notebook import OptionError
from mmsp_notebook.engine.messages import check_history, check_prompt_message


def test_a_prompt_message_is_a_user_s_with_items_mmsp_defines(fresh_session):
    """ask() takes a UniMessage as its prompt; one that would be sent broken is refused before any request."""
    for bad, said in [
        ({"role": "assistant", "content_items": [{"type": "text.done", "text": "hi"}]},
         "the prompt message: a UniMessage is a dict with role 'user', not 'assistant'"),
        ({"role": "user", "content_items": []}, "the prompt message has no content_items"),
        ({"role": "user", "content_items": "hi"}, "the prompt message: content_items must be a list"),
        ({"role": "user", "content_items": [{"type": "text.done"}]},
         "the prompt message.content_items[0]: text.done needs its 'text'"),
        ({"role": "user", "content_items": [{"type": "text.done", "text": "half \ud83d"}]}, "lone surrogate"),
    ]:
        with pytest.raises(OptionError) as caught:
            mn.ask(bad, stream=io.StringIO())
        assert said in str(caught.value), caught.value
    assert fresh_session.turns == []  # refused before anything was sent
    message = {"role": "user", "content_items": [{"type": "text.done", "text": "hello"}]}
    assert check_prompt_message(message) is message
    assert mn.ask(message, stream=io.StringIO()).status == "complete"


def test_a_history_is_checked_whole_each_fault_named_by_its_place():
    ok = [{"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]},
          {"role": "assistant", "content_items": [{"type": "text.done", "text": "hello"}]}]
    assert check_history(iter(ok)) == ok
    with pytest.raises(OptionError, match=r"^history\[1\]\.content_items\[0\]: 'text\.delta'|content_items must be"):
        check_history([ok[0], {"role": "assistant", "content_items": [{"type": "text.delta", "text": "x"}]}])
    with pytest.raises(OptionError, match=r"^history takes a list of UniMessages"):
        check_history(ok[0])


def test_an_image_data_url_in_a_given_history_or_prompt_message_is_checked():
    """A damaged data URL in chat.history or a prompt message went to the provider, which refused every turn."""
    bad = {"role": "user", "content_items": [{"type": "text.done", "text": "see"},
                                             {"type": "image_url.done", "image_url": "data:image/png;base64,!!!"}]}
    with pytest.raises(OptionError, match=r"^history\[1\]\.content_items\[1\]: not an image: .* holds damaged base64"):
        check_history([{"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]}, bad])
    with pytest.raises(OptionError, match=r"^the prompt message\.content_items\[1\]: not an image: "):
        check_prompt_message(bad)
    url = "https://example.com/cat.png"  # a URL the provider fetches stays as it is
    assert check_prompt_message({"role": "user", "content_items": [{"type": "image_url.done", "image_url": url}]})
