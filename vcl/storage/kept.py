"""What a holder keeps of the messages that cross its boundary (``run.keep_messages``): what it receives (``in``),
sends (``out``) and its clean values (``own``), at most ``run.keep_rows`` rows each (:func:`sampled`: one sample for
every holder), as wire frames in ``messages/round-<t>.vclw`` beside its checkpoints, whole or not at all; what
``train.py audit`` attacks (docs/privacy.md)."""

from __future__ import annotations

import dataclasses
import functools
import re
import struct
from pathlib import Path

import numpy as np
import torch

from vcl.errors import VCLInputError
from vcl.messages import Message
from vcl.storage.checkpoints import atomic_write
from vcl.transports.wire import pack_message, unpack_message

FOLDER = "messages"
DIRECTIONS = ("in", "out", "own")
_HEAD = struct.Struct("<BQ")  # the direction's index, the frame's length
_ROUND = re.compile(r"round-(\d{1,10})\.vclw")


class KeptMessages:
    """One holder's messages of the rounds not saved yet; ``on``: whether it keeps any (``run.keep_messages``);
    ``rows``: the most rows of a message it keeps (0: every row)."""

    def __init__(self, on: bool = False, rows: int = 0):
        self.on, self.rows = on, rows
        self.frames: list[tuple[int, bytes]] = []

    def add(self, direction: str, message: Message | None) -> None:
        if self.on and message is not None:
            self.frames.append((DIRECTIONS.index(direction), pack_message(sampled(message, self.rows))))

    def save(self, folder: Path, round_: int) -> None:
        """The messages since the last save, in ``folder/round-<round_>.vclw`` (never through a symbolic link)."""
        if not self.on:
            return
        if folder.is_symlink():
            raise VCLInputError(f"{folder} is a symbolic link, and vcl never writes through one; put a real directory "
                                "there and resume.")  # fmt: skip
        frames, self.frames = self.frames, []

        def write(file) -> None:
            for direction, frame in frames:
                file.write(_HEAD.pack(direction, len(frame)))
                file.write(frame)

        atomic_write(folder / f"round-{round_}.vclw", write)

    def forget(self) -> None:
        """Drop what was held since the last save (a resumed run makes those messages again)."""
        self.frames = []


def kept_rounds(folder: Path) -> list[int]:
    """The rounds whose messages ``folder`` holds, in order."""
    found = [_ROUND.fullmatch(p.name) for p in folder.glob("round-*.vclw")] if folder.is_dir() else []
    return sorted(int(m.group(1)) for m in found if m)


def read_kept(folder: Path, last: int | None = None) -> list[tuple[int, str, Message]]:
    """Every kept message in ``folder`` as (saved round, direction, message), rounds up to ``last`` (a later file is a
    run's that went further before it was resumed from an earlier round). A frame that is not a message of a kind this
    process knows ends the read with one sentence naming the file."""
    out = []
    for round_ in kept_rounds(folder):
        if last is not None and round_ > last:
            continue
        path = folder / f"round-{round_}.vclw"
        data, at = path.read_bytes(), 0
        while at < len(data):
            if at + _HEAD.size > len(data):
                raise VCLInputError(f"{path} ends inside a frame's header; it is not a file vcl wrote.")
            direction, length = _HEAD.unpack_from(data, at)
            at += _HEAD.size
            if direction >= len(DIRECTIONS) or at + length > len(data):
                raise VCLInputError(f"{path} holds a malformed frame at byte {at}; it is not a file vcl wrote.")
            try:
                message = unpack_message(data[at : at + length])
            except ValueError as err:
                raise VCLInputError(
                    f"{path}: {err}; load the run's method family first, or the file is not vcl's."
                ) from None
            out.append((round_, DIRECTIONS[direction], message))
            at += length
    return out


@functools.lru_cache(maxsize=16)
def kept_index(n: int, rows: int) -> np.ndarray:
    """The rows kept of an array of ``n`` rows: ``rows`` of them in order, drawn with ``n`` as the seed (no secret:
    which rows an audit scores is bookkeeping, not protection)."""
    return np.sort(np.random.default_rng(n).choice(n, rows, replace=False))


def sampled(value, rows: int):
    """``value`` with every array (tensor or NumPy) of more than ``rows`` rows cut to :func:`kept_index`'s rows,
    through dataclasses (a message, a data set), dicts, lists and tuples; ``value`` itself where nothing is cut."""
    if not rows:
        return value
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if value.ndim == 0 or len(value) <= rows:
            return value
        index = kept_index(len(value), rows)
        return value[torch.from_numpy(index).to(value.device)] if isinstance(value, torch.Tensor) else value[index]
    if isinstance(value, dict):
        out = {k: sampled(v, rows) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else type(value)(out)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        out = [sampled(v, rows) for v in value]
        return value if all(a is b for a, b in zip(out, value, strict=True)) else type(value)(out)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cut = {f.name: sampled(getattr(value, f.name), rows) for f in dataclasses.fields(value) if f.init}
        changed = {k: v for k, v in cut.items() if v is not getattr(value, k)}
        return dataclasses.replace(value, **changed) if changed else value
    return value
