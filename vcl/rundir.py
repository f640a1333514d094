"""The run directory (``--out``): checked before work starts, locked for the run's lifetime, and never
emptied of anything the suite did not write.

- A fresh run needs an empty or new directory. One that already holds files needs ``--resume`` (continue
  the run in it) or ``--overwrite``, which removes only the suite's own outputs (``results.json``,
  ``checkpoints/last.ckpt``, the parties' ``parties/<name>/round-<t>.ckpt``, TensorBoard event files, the
  organizations' own under ``parties/<name>/tensorboard/``) and
  keeps every other file.
- An exclusive lock (``.vcl.lock``, via ``filelock``) stops a second run on the same directory.
- A run that fails before its first checkpoint leaves the directory as it found it: what this run
  wrote is removed, and a directory it created is removed again once empty.
"""

from __future__ import annotations

import os
from pathlib import Path

from vcl.errors import VCLInputError

LOCK = ".vcl.lock"
RESULTS = "results.json"
CHECKPOINT = Path("checkpoints") / "last.ckpt"
EVENTS = "events.out.tfevents.*"


PARTIES = "parties"
PARTY_CHECKPOINT = "round-*.ckpt"  # parties/<name>/round-<t>.ckpt, each party's own state (vcl.transport)


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


class RunDirectory:
    """``--out`` for one run: :meth:`check` before data loading, then ``with`` it around the run and
    :meth:`begin` once the data and the protocol are built."""

    def __init__(self, path: Path, resume: bool = False, overwrite: bool = False):
        self.path, self.resume, self.overwrite = Path(path), resume, overwrite
        self._lock = None
        self._created: list[Path] = []  # directories this run made, deepest last
        self._before: set[Path] = set()  # files and directories there before this run

    # --- before any work -------------------------------------------------------------------------------
    def check(self) -> None:
        """One sentence, before anything is loaded, if ``--out`` cannot hold this run."""
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
        if self.resume or not p.is_dir():
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
        """Every input has been checked: with ``overwrite``, remove the previous run's outputs now."""
        if self.overwrite and not self.resume:
            for f in own_outputs(self.path):
                f.unlink()
            self._before = set(self.path.rglob("*"))

    def __exit__(self, kind, error, tb) -> None:
        if kind is not None and not (self.path / CHECKPOINT).is_file():
            # failed before any round was saved: take back what this run wrote, then the directories it made
            for f in own_outputs(self.path):
                if f not in self._before:
                    f.unlink()
            self._prune_new_dirs()
        if self._lock is not None:
            self._lock.release()
            if kind is not None and (self.path / LOCK) not in self._before:
                (self.path / LOCK).unlink(missing_ok=True)
        if kind is not None:
            self._remove_created_dirs()

    # --- helpers -------------------------------------------------------------------------------------------
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
