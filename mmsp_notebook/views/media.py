"""Media of a turn as a page shows it: ``data:`` URLs, raw PCM wrapped as WAV, audio length."""

from __future__ import annotations

import base64
import io
import wave

from ..core.items import ItemState
from ..core.turn import media_kind

__all__ = ["pcm_to_wav", "media_src"]


def pcm_to_wav(data: bytes, mime_type: str) -> bytes:
    """Wrap raw little-endian 16-bit PCM (``audio/L16;rate=24000``, ``audio/pcm``…) as a WAV file."""
    rate, channels = 24000, 1
    for part in mime_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key == "rate" and value.isdigit():
            rate = int(value)
        elif key == "channels" and value.isdigit():
            channels = int(value)
    # a rate or channel count no WAV header holds (0, or beyond its 16/32-bit fields) is the default
    if not 1 <= channels <= 0xFFFF:
        channels = 1
    if not 1 <= rate * channels * 2 <= 0xFFFFFFFF:
        rate = 24000
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data[: len(data) - len(data) % (2 * channels)])
    return buf.getvalue()


_PLAYABLE_AUDIO = {"audio/wav", "audio/x-wav", "audio/mpeg", "audio/mp3", "audio/ogg", "audio/webm", "audio/flac",
                   "audio/aac", "audio/mp4"}


def _container(data: bytes) -> str | None:
    """The audio file type ``data`` starts as (WAV, Ogg, FLAC, MP3 with ID3 tags, WebM, MP4), else ``None``."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    for magic, mime in ((b"OggS", "audio/ogg"), (b"fLaC", "audio/flac"), (b"ID3", "audio/mpeg"),
                        (b"\x1aE\xdf\xa3", "audio/webm")):
        if data.startswith(magic):
            return mime
    return "audio/mp4" if data[4:8] == b"ftyp" else None


def media_src(item: ItemState) -> tuple[str, float | None]:
    """A ``data:`` URL for an image or audio item (raw PCM wrapped as WAV), and audio seconds."""
    data = item.content()
    mime = (item.mime_type or "").split(";")[0].strip().lower()
    seconds = None
    if media_kind(item) == "audio":
        if mime not in _PLAYABLE_AUDIO:  # a file under another name (audio/wave, audio/opus) plays as what it is
            mime = _container(data) or mime
        if mime not in _PLAYABLE_AUDIO:
            data = pcm_to_wav(data, item.mime_type)
            mime = "audio/wav"
        if mime in ("audio/wav", "audio/x-wav"):
            try:
                with wave.open(io.BytesIO(data)) as w:
                    seconds = w.getnframes() / float(w.getframerate() or 1)
            except (wave.Error, EOFError):
                seconds = None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}", seconds
