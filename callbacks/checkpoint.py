"""A checkpoint after every round, written atomically (temporary file + rename), and its safe loading.

A checkpoint holds data only (tensors, numbers, strings, lists, dicts, numeric numpy arrays; fitted
scikit-learn estimators as skops bytes), so it loads with ``torch.load(weights_only=True)``: opening one
never runs code from it. A damaged, empty, foreign or crafted file is refused with one sentence.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import torch
from vcl.callbacks.base import RoundCallback

from vcl.errors import VCLInputError
from vcl.rundir import PARTIES

KEYS = ("identity", "protocol", "records", "round_seconds", "run_id", "data")
PARTY_KEYS = ("state", "party", "round", "run")


def atomic_torch_save(obj, path: Path) -> None:
    """``obj`` written to ``path`` whole or not at all. A write that fails (a full disk, a read-only or vanished
    directory: torch says so as a RuntimeError) leaves no partial file and raises an ``OSError`` naming ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(obj, tmp)
    except BaseException as err:  # an interrupt too: no half-written file stays
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(err, RuntimeError):  # torch's own words ("unexpected pos ..."); say what lies behind them
            code = errno.EIO
            with contextlib.suppress(OSError):
                if shutil.disk_usage(path.parent).free < 16 * 2**20:
                    code = errno.ENOSPC
                elif not os.access(path.parent, os.W_OK):
                    code = errno.EROFS
            reason = str(err).strip().splitlines()[0][:120] if code == errno.EIO else os.strerror(code)
            raise OSError(code, reason, str(path)) from None
        raise
    os.replace(tmp, path)


def _numpy_globals() -> list:
    """What a numeric numpy array needs to be rebuilt: its reconstructor, ndarray, dtype and the dtype classes."""
    try:
        from numpy._core.multiarray import _reconstruct as reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct as reconstruct
    dtypes = [type(np.dtype(t)) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "float32", "float64")]
    return [reconstruct, np.ndarray, np.dtype, *dtypes]


def load_checkpoint(path: Path, keys: tuple[str, ...] = KEYS) -> dict:
    """The run state in ``path`` (a party's own state with ``keys=PARTY_KEYS``), loaded without executing
    anything from the file; refused if it is not one."""
    fix = "start the run afresh (--overwrite) or point --out at another run."
    try:
        with torch.serialization.safe_globals(_numpy_globals()):
            state = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as err:
        found = re.search(r"Unsupported (global: GLOBAL \S+|operand \d+)", str(err))
        what = found.group(0) if found else "objects beyond tensors and plain values"
        raise VCLInputError(f"checkpoint {path} holds something other than data ({what}); refusing it: {fix}") from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as err:
        reason = str(err).strip().splitlines()[0][:120] if str(err).strip() else type(err).__name__
        raise VCLInputError(f"checkpoint {path} cannot be read ({reason}); it is damaged or not vcl's: {fix}") from None
    if (
        not isinstance(state, dict)
        or any(k not in state for k in keys)
        or not isinstance(state[keys[0]], dict)
        or ("data" in keys and not isinstance(state["data"], dict))
    ):
        raise VCLInputError(f"checkpoint {path} is not a run checkpoint of this version of vcl: {fix}")
    return state


class RoundCheckpoint(RoundCallback):
    """After every round: each party saves its own state under ``parties/<name>/`` (where it runs), then the
    coordinator's checkpoint, which holds only Alice's side, names the round; older party files go last."""

    filename = "last.ckpt"

    def on_run_start(self, run) -> None:
        run.protocol.federation.parties_in_state = False

    def on_round_end(self, run, record: dict) -> None:
        transport = run.protocol.federation.transport
        transport.save(run.out_dir / PARTIES, record["round"], run.stamp)
        atomic_torch_save(run.checkpoint(), run.out_dir / "checkpoints" / self.filename)
        run.saved_round = record["round"]
        transport.prune(run.out_dir / PARTIES, record["round"])
