"""Checkpoint files, in one place: written atomically (temporary file + rename), loaded as data only, and a
party's own files (``<root>/<party>/<run id>/round-<t>.ckpt``; before: ``<root>/<party>/round-<t>.ckpt``).

A checkpoint holds data only (scikit-learn estimators as skops bytes) and loads with ``torch.load(weights_only=True)``;
a damaged, empty, foreign or crafted file is refused with one sentence."""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import shutil
import signal
import threading
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from vcl.datamodules.prepare import Preparation
from vcl.datamodules.reading import string_array
from vcl.errors import VCLInputError

KEYS = ("identity", "protocol", "records", "round_seconds", "run_id", "data")
PARTY_KEYS = ("state", "party", "round", "run")


@contextlib.contextmanager
def interrupts_held():
    """Ctrl-C or SIGTERM arriving inside the block take effect at its end, through the handlers in place before it
    (main thread only; elsewhere signals never reach Python code). For steps that must happen together or not at
    all: a checkpoint's rename and the round the run then reports as saved."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = [sig for sig in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(sig) is not None]  # None: not Python's
    before = {sig: signal.signal(sig, lambda number, _frame: caught.append(number)) for sig in held}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for number in dict.fromkeys(caught):
            signal.raise_signal(number)


def atomic_torch_save(obj, path: Path, then=None) -> None:
    """``obj`` written to ``path`` whole or not at all, readable by its owner only (0600: a checkpoint holds a party's
    models and data-derived state). A failed write leaves no partial file and raises an ``OSError`` naming ``path``;
    ``then()`` runs with the rename, no interrupt between them: both happen or neither."""
    atomic_write(path, lambda file: torch.save(obj, file), then)


def atomic_write(path: Path, write, then=None) -> None:
    """What ``write(file)`` writes, in ``path`` whole or not at all, its owner's only (:func:`atomic_torch_save`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:  # its owner's only
            write(file)
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
    with interrupts_held():
        os.replace(tmp, path)
        if then is not None:
            then()


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


def party_file(root: Path, name: str, round_: int, run_folder: str = "") -> Path:
    """``root/<name>/round-<t>.ckpt`` (``root/<name>/<run_folder>/round-<t>.ckpt`` with ``run_folder``); refuses a
    name or run folder that is not one plain path component, or a round that is not a whole number from 0 to 10^9."""
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        raise ValueError(f"party name {name!r} cannot name a checkpoint folder.")
    if run_folder and not RUN_FOLDER.fullmatch(run_folder):
        raise ValueError(f"run {run_folder!r} cannot name a checkpoint folder.")
    if type(round_) is not int or not 0 <= round_ <= 10**9:
        raise VCLInputError(f"a checkpoint's round is a whole number from 0 to 10^9, not {round_!r}.")
    return Path(root) / name / run_folder / f"round-{round_}.ckpt"


RUN_FOLDER = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a run's identity as a folder name: the first part of its stamp


def run_of(stamp: str) -> str:
    """The run's identity in a checkpoint stamp (``<run id>/<settings digest>``), as a party's folder for the run's
    files; one that cannot name a folder is refused (:class:`ValueError`)."""
    run = str(stamp).partition("/")[0]
    if not RUN_FOLDER.fullmatch(run):
        raise ValueError(f"the run's stamp {str(stamp)[:80]!r} names no run a folder can hold.")
    return run


def save_party(party, name: str, root: Path, round_: int, run: str, run_folder: str = "") -> None:
    """What a party does to checkpoint itself: its own state and :meth:`vcl.family.Party.preparation`, stamped with its
    run, written atomically where it runs (never through a symbolic link)."""
    path = party_file(root, name, round_, run_folder)
    for place in (path.parent, path.parent.parent):
        if place.is_symlink():
            raise VCLInputError(
                f"party {name}'s checkpoint folder {place} is a symbolic link, and vcl never writes through one; "
                "put a real directory there (the run's transport.party_dirs, or a party config's root where the "
                "party runs on its own machine) and resume."
            )
    saved = {"state": party.state_dict(), "party": name, "round": round_, "run": run}
    atomic_torch_save(saved | {"preparation": party.preparation()}, path)


def load_party(party, name: str, root: Path, round_: int, run: str, run_folder: str = "") -> None:
    """A party reads back its own state of ``round_`` (:func:`read_party`)."""
    party.load_state_dict(read_party(name, root, round_, run, run_folder)["state"])


def read_party(name: str, root: Path, round_: int, run: str, run_folder: str = "") -> dict:
    """Party ``name``'s own checkpoint of ``round_`` (:func:`save_party`'s fields); one sentence if it is missing,
    another party's, or another run's (``run``: the stamp :func:`save_party` wrote). With ``run_folder``, falls back
    to ``root/<name>/round-<t>.ckpt``, where a party kept it before runs had folders of their own."""
    path = party_file(root, name, round_, run_folder)
    if run_folder and not path.is_file() and party_file(root, name, round_).is_file():
        path = party_file(root, name, round_)  # the stamp below still says whose it is
    if not path.is_file():
        raise VCLInputError(
            f"--resume: party {name} has no checkpoint of round {round_} at {path}; resume where that party's "
            "directory is, or start the run afresh with --overwrite."
        )
    saved = load_checkpoint(path, PARTY_KEYS)
    if saved["party"] != name or saved["round"] != round_:
        raise VCLInputError(
            f"--resume: {path} holds party {saved['party']}'s round {saved['round']}, not {name}'s round {round_}; "
            "restore that party's directory or start afresh with --overwrite."
        )
    if saved["run"] != run:
        other = saved["run"].rpartition("/")[2] != run.rpartition("/")[2]
        whose = "a run with other settings" if other else "another run"
        raise VCLInputError(
            f"--resume: {path} holds party {name}'s round {round_} of {whose}, not of the run in this --out; "
            "put back that party's own files of this run, or start afresh with --overwrite."
        )
    return saved


def prune_party(name: str, root: Path, round_: int, run_folder: str = "") -> None:
    """Remove the party's own checkpoints of rounds before ``round_`` (files only this party wrote), only when it
    holds the checkpoint of ``round_`` itself: a prune never leaves a party without its latest state."""
    latest = party_file(root, name, round_, run_folder)
    folder = latest.parent
    if not latest.is_file():
        return
    for path in folder.glob("round-*.ckpt") if folder.is_dir() else []:
        stem = path.name[len("round-") : -len(".ckpt")]
        if stem.isdigit() and int(stem) < round_:
            path.unlink()


def pack_ids(ids) -> dict[str, torch.Tensor]:
    """Row IDs (a list of texts, or an Arrow array of them) as a checkpoint keeps them: their UTF-8 bytes end to end
    and where each ends (two tensors: milliseconds to save, where a list of strings takes seconds)."""

    array = string_array(ids).cast(pa.large_string())
    _, offsets, data = array.buffers()
    ends = np.frombuffer(offsets, dtype=np.int64, count=array.offset + len(array) + 1)[array.offset :]
    first = int(ends[0])  # a slice's (or a cast's) bytes may begin after others in its buffer
    utf8 = np.empty(0, np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8, count=int(ends[-1]))[first:]
    return {"utf8": torch.from_numpy(utf8.copy()), "ends": torch.from_numpy(ends[1:] - first)}


def unpack_ids(packed, path: Path) -> list[str] | None:
    """The row IDs a checkpoint keeps (:func:`pack_ids`; a checkpoint of an earlier version keeps a list); a field
    that is neither is refused with one sentence naming ``path``."""
    if packed is None or (isinstance(packed, list) and all(type(i) is str for i in packed)):
        return packed

    utf8, ends = (packed.get(k) if isinstance(packed, dict) else None for k in ("utf8", "ends"))
    ok = isinstance(utf8, torch.Tensor) and isinstance(ends, torch.Tensor) and utf8.dtype == torch.uint8
    ok = ok and ends.dtype == torch.int64 and utf8.dim() == 1 and ends.dim() == 1
    if ok:
        ends = ends.numpy()
        ok = (len(ends) == 0 or (ends[0] >= 0 and ends[-1] == len(utf8))) and bool((np.diff(ends) >= 0).all())
    if ok:
        offsets = pa.py_buffer(np.concatenate([[0], ends]).astype(np.int64))
        array = pa.LargeStringArray.from_buffers(len(ends), offsets, pa.py_buffer(utf8.numpy()))
        try:
            array.validate(full=True)  # UTF-8 throughout
        except pa.ArrowInvalid:
            ok = False
    if not ok:
        raise VCLInputError(f"checkpoint {path} keeps row IDs that are not text; start the run afresh (--overwrite).")
    return array.to_pylist()


def kept_preparation(name: str, root: Path, round_: int, run: str, run_folder: str = "") -> dict:
    """What party ``name`` kept in its checkpoint of ``round_`` to be built again on new rows: the fitted preparation
    of each organization's columns it holds, by the organization's place, checked; one sentence if it kept none."""
    saved = read_party(name, root, round_, run, run_folder)
    where = f"party {name}'s checkpoint {party_file(root, name, round_, run_folder)}"
    states = saved.get("preparation")
    if not isinstance(states, list) or not states:
        raise VCLInputError(
            f"{where} keeps no preparation of its columns (its party's preparation() gave none), so it cannot "
            "prepare new rows without its training file; a family whose parties keep none sets "
            "parties_keep_preparation = False, and its runs predict from their training files."
        )
    return {p.place: p for p in (Preparation.from_state(s, where) for s in states)}
