"""Media as a page shows it: raw PCM wrapped as WAV whatever its MIME type's parameters say."""

from __future__ import annotations

import base64
import io
import wave

import pytest

from mmsp_notebook.views.media import pcm_to_wav


@pytest.mark.parametrize("mime", ["audio/L16;rate=0", "audio/L16;rate=99999999999", "audio/pcm;channels=0",
                                  "audio/pcm;channels=70000"])
def test_pcm_with_a_rate_or_channels_no_wav_holds_plays_at_the_default(mime):
    wav = pcm_to_wav(b"\x01\x02" * 10, mime)
    with wave.open(io.BytesIO(wav)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (24000, 1, 10)


def test_pcm_rate_and_channels_from_the_mime_type_are_kept():
    with wave.open(io.BytesIO(pcm_to_wav(b"\x00" * 16, "audio/L16;rate=16000;channels=2"))) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (16000, 2, 4)


def _turn_with(item):
    from mmsp_notebook.core.turn import Turn

    turn = Turn({"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]}, model="demo")
    step = turn.new_step()
    for event_type, items in (("delta", [{**item, "type": "inline_data.delta"}]), ("delta", [item]), ("stop", [])):
        step.feed({"role": "assistant", "event_type": event_type, "content_items": items, "created_at": 1,
                   "usage_metadata": {"prompt_tokens": 1, "response_tokens": 1} if event_type == "stop" else None,
                   "finish_reason": "stop" if event_type == "stop" else None})
    return turn


def test_a_turn_with_pcm_of_a_rate_no_wav_holds_still_renders():
    from mmsp_notebook.views.html import render_html, render_text

    turn = _turn_with({"type": "inline_data.done", "data": b"\x01\x02" * 10, "mime_type": "audio/L16;rate=0"})
    assert '<audio class="mmsp-audio-player" controls src="data:audio/wav;base64,' in render_html(turn)
    assert "[audio] audio/L16;rate=0" in render_text(turn)


def test_an_audio_file_under_a_type_of_another_name_plays_as_what_it_is_not_wrapped_again():
    """audio/wave (WAV's registered name), audio/opus, audio/x-flac were taken for raw PCM: a WAV inside a WAV."""
    from mmsp_notebook.views.media import media_src

    with wave.open(buf := io.BytesIO(), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 4000)
    wav = buf.getvalue()
    for mime, data, src_type, seconds in (("audio/wave", wav, "audio/wav", 0.5), ("audio/vnd.wave", wav, "audio/wav", 0.5),
                                          ("audio/opus", b"OggS\x00\x02" + b"\x00" * 30, "audio/ogg", None),
                                          ("audio/x-flac", b"fLaC\x00\x00\x00\x22", "audio/flac", None),
                                          ("audio/x-m4a", b"\x00\x00\x00\x20ftypM4A ", "audio/mp4", None)):
        turn = _turn_with({"type": "inline_data.done", "data": data, "mime_type": mime})
        src, secs = media_src(turn.items[0])
        assert src.startswith(f"data:{src_type};base64,") and secs == seconds, mime
        assert base64.b64decode(src.split(",", 1)[1]) == data
    pcm = _turn_with({"type": "inline_data.done", "data": b"\x10\x00" * 2400, "mime_type": "audio/L16;rate=24000"})
    assert media_src(pcm.items[0])[1] == 0.1  # raw PCM is still wrapped
