"""Media the demo model generates: a PNG picture, a PCM chime and embedding vectors.

Everything is made with the standard library (``zlib``, ``struct``, ``array``, ``math``) and is
deterministic for a given seed.
"""

from __future__ import annotations

import array
import hashlib
import math
import random
import struct
import sys
import zlib

__all__ = ["PCM_MIME_TYPE", "PCM_RATE", "embedding", "make_pcm", "make_pcm_chunks", "make_png"]

# Gemini's TTS mime type for raw 16-bit little-endian mono PCM, which MMSP's tracer plays as
# 24 kHz mono (Tracer._build_wave_bytes_from_pcm).
PCM_RATE = 24000
PCM_MIME_TYPE = "audio/L16;codec=pcm;rate=24000"
PCM_CHUNK_SECONDS = 0.04

_PALETTE = {
    "red": (220, 60, 60),
    "orange": (240, 150, 40),
    "yellow": (240, 210, 60),
    "green": (60, 170, 90),
    "teal": (40, 160, 170),
    "blue": (60, 100, 220),
    "purple": (140, 80, 200),
    "pink": (230, 110, 170),
}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def make_png(seed: int, width: int = 160, height: int = 100) -> tuple[bytes, str]:
    """A small RGB picture: a gradient sky, a circle, a rectangle and a triangle.

    Args:
        seed: Chooses the colours and positions.
        width: Pixels across.
        height: Pixels down.

    Returns:
        The PNG file's bytes and a short description of what it shows.
    """
    rng = random.Random(seed)
    names = rng.sample(sorted(_PALETTE), 3)
    colours = [_PALETTE[name] for name in names]
    top, bottom = (200, 225, 250), (250, 245, 230)
    pixels = [bytearray() for _ in range(height)]
    for y in range(height):
        t = y / max(1, height - 1)
        row_colour = bytes(int(top[i] + (bottom[i] - top[i]) * t) for i in range(3))
        pixels[y] = bytearray(row_colour * width)

    def put(x: int, y: int, colour: tuple[int, int, int]) -> None:
        if 0 <= x < width and 0 <= y < height:
            pixels[y][3 * x : 3 * x + 3] = bytes(colour)

    cx, cy, radius = rng.randint(25, 55), rng.randint(30, 60), rng.randint(14, 22)
    for y in range(cy - radius, cy + radius + 1):
        for x in range(cx - radius, cx + radius + 1):
            if (x - cx) ** 2 + (y - cy) ** 2 <= radius**2:
                put(x, y, colours[0])
    rx, ry, rw, rh = rng.randint(65, 90), rng.randint(45, 60), rng.randint(25, 40), rng.randint(20, 32)
    for y in range(ry, ry + rh):
        for x in range(rx, rx + rw):
            put(x, y, colours[1])
    base_y, apex_x, half = height - 8, rng.randint(115, 140), rng.randint(14, 20)
    apex_y = base_y - rng.randint(30, 45)
    for y in range(apex_y, base_y + 1):
        span = int(half * (y - apex_y) / max(1, base_y - apex_y))
        for x in range(apex_x - span, apex_x + span + 1):
            put(x, y, colours[2])

    raw = b"".join(b"\x00" + bytes(row) for row in pixels)
    png = (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )
    description = f"a {names[0]} circle, a {names[1]} rectangle and a {names[2]} triangle under a pale sky"
    return png, description


def make_pcm(seed: int, notes: int = 5, note_seconds: float = 0.12) -> bytes:
    """A short chime: a few rising chirps, as 24 kHz 16-bit little-endian mono PCM.

    Args:
        seed: Chooses the pitches.
        notes: How many chirps.
        note_seconds: The length of each.

    Returns:
        The raw PCM bytes.
    """
    rng = random.Random(seed)
    scale = [261.63, 293.66, 329.63, 392.0, 440.0, 523.25, 587.33, 659.25]
    samples = array.array("h")
    per_note = int(PCM_RATE * note_seconds)
    fade = int(PCM_RATE * 0.01)
    for _ in range(notes):
        start = rng.choice(scale)
        end = start * rng.choice((1.0, 1.12, 1.25))
        phase = 0.0
        for n in range(per_note):
            frequency = start + (end - start) * n / per_note
            phase += 2 * math.pi * frequency / PCM_RATE
            envelope = min(1.0, n / fade, (per_note - n) / fade)
            samples.append(int(0.3 * 32767 * envelope * math.sin(phase)))
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


def make_pcm_chunks(seed: int) -> list[bytes]:
    """:func:`make_pcm` cut into 40 ms chunks, the pieces it streams as."""
    pcm = make_pcm(seed)
    size = int(PCM_RATE * PCM_CHUNK_SECONDS) * 2
    return [pcm[index : index + size] for index in range(0, len(pcm), size)]


def embedding(text: str, dimensions: int) -> list[float]:
    """A deterministic unit vector for a text.

    Args:
        text: What is embedded.
        dimensions: The vector's length.

    Returns:
        The vector, of Euclidean norm 1, rounded to 6 decimals.
    """
    rng = random.Random(hashlib.sha256(text.encode("utf-8")).hexdigest())
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return [round(value / norm, 6) for value in vector]
