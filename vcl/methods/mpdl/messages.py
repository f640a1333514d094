"""MPDL's own messages beyond the dual models' and the PSI's: a party's report to the experimenter."""

from __future__ import annotations

from dataclasses import dataclass, field

from vcl.messages import Message


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class Report(Message):
    """A party (or the coordinator) → the experimenter: what it holds that the run's scores need (the models
    it keeps, what it received). Outside the protocol: recorded, never counted as communication."""

    values: dict = field(repr=False)

    tensors = {"*": "values"}  # its tensors; the rest (counts, row indices) rides along uncounted
