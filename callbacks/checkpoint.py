"""A checkpoint after every round, written atomically (temporary file + rename)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from callbacks.base import RoundCallback


def atomic_torch_save(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


class RoundCheckpoint(RoundCallback):
    filename = "last.ckpt"

    def on_round_end(self, run, record: dict) -> None:
        atomic_torch_save(run.checkpoint(), run.out_dir / "checkpoints" / self.filename)
