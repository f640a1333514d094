"""The run directory (``--out``): checked before work starts, locked for the run's lifetime, and never
emptied of anything the suite did not write.

- A fresh run needs an empty or new directory. One that already holds files needs ``--resume`` (continue
  the run in it) or ``--overwrite``, which replaces only the suite's own outputs (``results.json``,
  ``checkpoints/last.ckpt``, the parties' ``parties/<name>/round-<t>.ckpt``, TensorBoard event files, the
  organizations' own under ``parties/<name>/tensorboard/``) and keeps every other file.
- ``--overwrite`` replaces a run only once the new one completes: until then the outputs it replaces wait in
  ``.vcl.previous/`` inside the run directory. A new run that fails with an error is taken back and the previous
  outputs return to their places, byte for byte; one that is interrupted (Ctrl-C, SIGTERM, a lost party) after
  its first checkpoint can be resumed, and ``.vcl.previous/`` goes when a run in the directory completes.
- Nothing is written, replaced or removed through a symbolic link: a link where the suite keeps its outputs is
  refused before any work.
- An exclusive lock (``.vcl.lock``, via ``filelock``) stops a second run on the same directory.
- A run that fails before its first checkpoint leaves the directory as it found it: what this run
  wrote is removed, and a directory it created is removed again once empty.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from vcl.errors import PartyLost, VCLInputError

LOCK = ".vcl.lock"
RESULTS = "results.json"
CHECKPOINT = Path("checkpoints") / "last.ckpt"
EVENTS = "events.out.tfevents.*"
PREVIOUS = ".vcl.previous"  # the outputs an --overwrite replaces, kept until the new run completes


PARTIES = "parties"
PARTY_CHECKPOINT = "round-*.ckpt"  # parties/<name>/round-<t>.ckpt, each party's own state (vcl.transport)
OWN_FOLDERS = ("checkpoints", "tensorboard", PARTIES, PREVIOUS)  # where the suite writes below the run directory


def own_outputs(root: Path) -> list[Path]:
    """The files under ``root`` that the suite writes (not the lock): results, checkpoint, the parties' own
    checkpoints, TensorBoard events."""
    names = [RESULTS, RESULTS + ".tmp", str(CHECKPOINT), str(CHECKPOINT) + ".tmp"]
    files = [root / n for n in names if (root / n).is_file()]
    found = []
    for folder, pattern in (
        ("tensorboard", EVENTS),
        (PARTIES, PARTY_CHECKPOINT),
        (PARTIES, PARTY_CHECKPOINT + ".tmp"),
        (PARTIES, EVENTS),  # an organization's own TensorBoard log: parties/<name>/tensorboard/
    ):
        if (root / folder).is_dir():
            found += [p for p in (root / folder).rglob(pattern) if p.is_file()]
    return files + sorted(found)


def not_ours(root: Path) -> tuple[Path, str] | None:
    """The first thing under ``root`` at a path the suite writes to that the suite did not write (a directory, or
    a file without the mark of its kind: a torch checkpoint is a zip, results.json a JSON object), and what it is."""
    places = [root / RESULTS, root / CHECKPOINT]
    if (root / PARTIES).is_dir():
        places += sorted((root / PARTIES).glob(f"*/{PARTY_CHECKPOINT}"))
    for folder in ("tensorboard", PARTIES):
        if (root / folder).is_dir():
            places += sorted((root / folder).rglob(EVENTS))
    for place in places:
        if not place.exists():
            continue
        if not place.is_file():
            return place, "a directory" if place.is_dir() else "not a regular file"
        with open(place, "rb") as f:
            head = f.read(64)
        if place.suffix == ".ckpt" and not head.startswith(b"PK\x03\x04"):
            return place, "not a torch checkpoint"
        if place.name == RESULTS and not head.lstrip().startswith(b"{"):
            return place, "not a JSON object"
    return None


def link_in(root: Path) -> Path | None:
    """The first symbolic link where the suite keeps its outputs under ``root`` (None if there is none)."""
    for name in (LOCK, RESULTS, RESULTS + ".tmp", *OWN_FOLDERS):
        if (root / name).is_symlink():
            return root / name
    for folder in OWN_FOLDERS:
        for where, dirs, files in os.walk(root / folder):  # never follows a link
            for name in sorted(dirs + files):
                if (Path(where) / name).is_symlink():
                    return Path(where) / name
    return None


def strict_json(obj, indent: int = 2) -> str:
    """``obj`` as standard JSON, which any parser reads: a number that is not finite (a loss that diverged to
    NaN or infinity) is written as null."""

    def finite(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [finite(v) for v in value]
        return value

    return json.dumps(finite(obj), indent=indent, allow_nan=False)


def atomic_write_json(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(strict_json(obj))
    os.replace(tmp, path)


class RunDirectory:
    """``--out`` for one run: :meth:`check` before data loading, then ``with`` it around the run and
    :meth:`begin` once the data and the protocol are built."""

    def __init__(self, path: Path, resume: bool = False, overwrite: bool = False):
        self.path, self.resume, self.overwrite = Path(path), resume, overwrite
        self._lock = None
        self._created: list[Path] = []  # directories this run made, deepest last
        self._before: set[Path] = set()  # files and directories there before this run
        self._replacing = False  # an --overwrite whose previous outputs wait in PREVIOUS

    # --- before any work -------------------------------------------------------------------------------
    def check(self) -> None:
        """One sentence, before anything is loaded, if ``--out`` cannot hold this run."""
        try:
            self._check()
        except OSError as err:  # a name too long, a loop of links, ...
            raise VCLInputError(f"--out {self.path} cannot be used ({err.strerror}); choose another --out.") from None

    def _check(self) -> None:
        p = self.path
        for parent in [p, *p.parents]:
            if parent.exists() and not parent.is_dir():
                where = "is a file" if parent == p else f"is under the file {parent}"
                raise VCLInputError(f"--out {p} {where}; give a directory path for the run.")
            if parent.is_dir():
                if not os.access(parent, os.W_OK | os.X_OK):
                    raise VCLInputError(
                        f"--out {p}: {parent} is not writable (permissions or a read-only filesystem); "
                        "choose a writable --out."
                    )
                break
        if not p.is_dir():
            return
        link = link_in(p)
        if link is not None:
            raise VCLInputError(
                f"--out {p}: {link} is a symbolic link, and vcl never writes, replaces or removes its outputs "
                "through a link; put the real directory or file in its place, or choose another --out."
            )
        foreign = not_ours(p)
        if foreign is not None:
            raise VCLInputError(
                f"--out {p}: {foreign[0]} is {foreign[1]}, which vcl did not write, where the run writes its own; "
                "move it away or choose another --out."
            )
        for folder in (p, *(q for name in OWN_FOLDERS for q in _folders(p / name))):
            if not os.access(folder, os.W_OK | os.X_OK):
                raise VCLInputError(
                    f"--out {p}: {folder} is not writable (permissions or a read-only filesystem), and the run writes "
                    "there; make it writable or choose another --out."
                )
        if self.resume:
            return
        held = sorted(str(q.relative_to(p)) for q in p.iterdir() if q.name != LOCK)
        if held and not self.overwrite:
            shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
            raise VCLInputError(
                f"--out {p} already holds files ({shown}); continue that run with --resume, replace the suite's "
                "own outputs with --overwrite (other files are kept), or choose another --out."
            )

    # --- for the run's lifetime ----------------------------------------------------------------------------
    def __enter__(self) -> RunDirectory:
        from filelock import FileLock, Timeout

        missing = [q for q in [self.path, *self.path.parents] if not q.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._created = list(reversed(missing))
            self._before = set(self.path.rglob("*"))
            lock = FileLock(str(self.path / LOCK), timeout=0)
            lock.acquire()
        except Timeout:
            self._remove_created_dirs()
            raise VCLInputError(
                f"--out {self.path} is in use by another run (it holds {LOCK}); wait for that run or choose "
                "another --out."
            ) from None
        except OSError as err:
            self._remove_created_dirs()
            raise VCLInputError(
                f"--out {self.path} cannot be written ({err.strerror}); choose another --out."
            ) from None
        self._lock = lock
        return self

    def begin(self) -> None:
        """Every input has been checked: with ``overwrite``, set the previous run's outputs aside now."""
        if self.overwrite and not self.resume:
            previous = self.path / PREVIOUS
            if previous.is_dir():  # an earlier replacement that never completed: its outputs go, the run it
                for f in own_outputs(self.path):  # was replacing stays set aside
                    f.unlink()
            else:
                for f in own_outputs(self.path):
                    aside = previous / f.relative_to(self.path)
                    aside.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(f, aside)
            self._replacing = previous.is_dir()
            self._before = set(self.path.rglob("*"))

    def __exit__(self, kind, error, tb) -> None:
        try:
            self._finish(kind)
        except OSError:  # the directory went away under the run: nothing left to tidy
            pass
        if self._lock is not None:
            self._lock.release()
            if kind is not None and (self.path / LOCK) not in self._before:
                (self.path / LOCK).unlink(missing_ok=True)
        if kind is not None:
            self._remove_created_dirs()

    def _finish(self, kind) -> None:
        saved = (self.path / CHECKPOINT).is_file()
        resumable = kind is not None and issubclass(kind, (KeyboardInterrupt, PartyLost)) and saved
        refused = kind is not None and issubclass(kind, VCLInputError) and not self.resume  # found in the data
        if kind is None:
            self._clear_previous()
        elif not saved or refused or (self._replacing and not resumable):
            # failed before any round was saved, refused an input it met during the rounds, or a replacement failed:
            # take back what this run wrote, put the outputs it was replacing back, remove the directories it made
            for f in own_outputs(self.path):
                if f not in self._before:
                    f.unlink()
            self._restore_previous()
            self._prune_new_dirs()

    # --- helpers -------------------------------------------------------------------------------------------
    def _restore_previous(self) -> None:
        previous = self.path / PREVIOUS
        if not self._replacing or not previous.is_dir():
            return
        for f in own_outputs(previous):
            back = self.path / f.relative_to(previous)
            back.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, back)
        _remove_empty_dirs(previous)

    def _clear_previous(self) -> None:
        previous = self.path / PREVIOUS
        if previous.is_dir() and not previous.is_symlink():
            for f in own_outputs(previous):
                f.unlink()
            _remove_empty_dirs(previous)

    def _prune_new_dirs(self) -> None:
        """Remove the empty directories this run made inside the run directory (never a file)."""
        made = [q for q in self.path.rglob("*") if q.is_dir() and q not in self._before]
        for d in sorted(made, key=lambda q: len(q.parts), reverse=True):
            if not any(d.iterdir()):
                d.rmdir()

    def _remove_created_dirs(self) -> None:
        for d in reversed(self._created):  # deepest first
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()


def _remove_empty_dirs(root: Path) -> None:
    """``root`` and the directories under it, those that are empty (deepest first); files stay."""
    folders = [q for q in root.rglob("*") if q.is_dir() and not q.is_symlink()]
    for d in sorted([*folders, root], key=lambda q: len(q.parts), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()


def _folders(root: Path) -> list[Path]:
    """``root`` and the directories under it, if it is one."""
    return [Path(where) for where, _, _ in os.walk(root)]
