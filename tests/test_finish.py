"""Every front door finishes a turn the same way: strict mode, the events table and "drawn in this cell"
follow the kernel's settings whether the turn came from %%mmsp, ask(), Chat.send() or replay()."""

from __future__ import annotations

import io

import pytest
from helpers import html_of, text_of
from test_magic import notebook, run_notebook

SETUP = "%load_ext mmsp_notebook\nimport mmsp_notebook as mn\nfrom mmsp_notebook import Chat, TurnError"


def test_strict_events_and_drawn_in_cell_are_the_same_through_every_door(tmp_path, monkeypatch):
    nb = notebook(
        SETUP,
        "%mmsp config events=true strict=true",
        "%%mmsp -m demo+nostop\nhi",                       # 2: strict from the settings
        'mn.ask("hi", model="demo+nostop")',               # 3
        'Chat("demo+nostop").send("hi")',                  # 4
        "%%mmsp --chat a\nhello",                          # 5: events table from the settings
        'mn.ask("hello", chat="b")',                       # 6
        "%mmsp config strict=false",
        'c = Chat("demo+nostop")\nt = c.send("hi")\nprint(t.status)',  # 8: not strict any more
        'mn.ask("hello", chat="b", strict=True)',          # 9: a door's own option still wins
        'mn.replay(mn.ask("replay me", chat="r", stream=__import__("io").StringIO()).trace_id)',  # 10
    )
    run_notebook(nb, tmp_path, monkeypatch, allow_errors=True)
    c = nb.cells
    for i in (2, 3, 4):
        assert "TurnError" in text_of(c[i]) and "incomplete" in text_of(c[i]), (i, text_of(c[i]))
    for i in (5, 6):
        html = html_of(c[i])
        assert 'class="mmsp-events"' in html, i
        # drawn live in the cell: the cell's value is the one-line summary, not a second rendering
        results = [o for o in c[i].outputs if o.output_type == "execute_result"]
        assert all("text/html" not in o.data for o in results), i
        assert html.count('class="mmsp-events"') == 1, i
    assert text_of(c[8]).strip().splitlines()[-1] == "incomplete"
    assert not any(o.output_type == "error" for o in c[9].outputs)
    results = [o for o in c[10].outputs if o.output_type == "execute_result"]
    assert results and "text/html" not in results[0].data and results[0].data["text/plain"].startswith("<Turn ")
    assert not any(o.output_type == "error" for o in c[10].outputs)


@pytest.mark.parametrize("where", ["made", "started"])
def test_an_interrupt_while_the_view_is_made_cancels_the_turn_and_frees_its_conversation(fresh_session, monkeypatch,
                                                                                         where):
    """The first view of a kernel takes a moment (its imports, its comm): an interrupt there ends
    the turn too (not left streaming unseen, holding its chat), and goes on up as the interrupt
    that stopped it, its turn kept, saying it was not shown."""
    from mmsp_notebook.engine.launch import launch
    from mmsp_notebook.front import finish
    from mmsp_notebook.views.live import TextLive

    class Unstarted(TextLive):
        def start(self, turn):
            raise KeyboardInterrupt

    def interrupted(*args, **kwargs):
        if where == "made":
            raise KeyboardInterrupt
        return Unstarted(io.StringIO())

    kept = []
    run, future = launch("hello", model="demo+stall", trace=False)
    with monkeypatch.context() as mp:
        mp.setattr(finish, "live_view", interrupted)
        with pytest.raises(finish.Interrupted, match="cancelled before it was shown") as caught:
            finish.present(run, future, stream=io.StringIO(), keep=kept.append)
    assert future.result(timeout=10).status == "cancelled"
    assert caught.value.turn is kept[0] and kept[0].status == "cancelled"
    run, future = launch("still there?", trace=False)
    assert finish.present(run, future, stream=io.StringIO()).status == "complete"
