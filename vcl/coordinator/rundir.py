"""The run directory (``--out``): checked before work starts, locked for the run's lifetime (``.vcl.lock``), and
never emptied of anything the suite did not write. ``--overwrite`` replaces only the suite's own outputs, once the
new run completes (until then they wait in ``.vcl.previous/``); nothing goes through a symbolic link; a run that
fails before its first checkpoint leaves the directory as it found it. Rules: docs/usage.md ("The run directory")."""

from __future__ import annotations

import json
import math
import os
import platform
from importlib import metadata
from pathlib import Path

from vcl.errors import OutOfMemory, PartyLost, VCLInputError

LOCK = ".vcl.lock"
RESULTS = "results.json"
CHECKPOINT = Path("checkpoints") / "last.ckpt"
EVENTS = "events.out.tfevents.*"
PREVIOUS = ".vcl.previous"  # the outputs an --overwrite replaces, kept until the new run completes


PARTIES = "parties"
PARTY_CHECKPOINT = "round-*.ckpt"  # parties/<name>/round-<t>.ckpt, each party's own state (vcl.transport)
KEPT = "messages"  # messages/round-<t>.vclw and parties/<name>/messages/: what each holder kept (vcl.storage.kept)
KEPT_FILE = "round-*.vclw"
OWN_FOLDERS = ("checkpoints", "tensorboard", PARTIES, KEPT, PREVIOUS)  # where the suite writes below the run directory


def own_outputs(root: Path) -> list[Path]:
    """The files under ``root`` that the suite writes (not the lock): results, checkpoint, the parties' own
    checkpoints, TensorBoard events."""
    names = [RESULTS, RESULTS + ".tmp", str(CHECKPOINT), str(CHECKPOINT) + ".tmp"]
    files = [root / n for n in names if (root / n).is_file()]
    events = [p for p in (root / "tensorboard").rglob(EVENTS) if p.is_file()] if (root / "tensorboard").is_dir() else []
    kept = [p for p in (root / KEPT).glob(KEPT_FILE + "*") if p.is_file()] if (root / KEPT).is_dir() else []
    return files + sorted(events) + sorted(kept) + party_outputs(root / PARTIES)


def party_outputs(folder: Path) -> list[Path]:
    """The parties' own files under ``folder`` (``<name>/round-<t>.ckpt`` and ``<name>/tensorboard/`` events: the
    run's ``parties/`` or a root of ``transport.party_dirs``), not those set aside in its ``.vcl.previous/``."""
    if not folder.is_dir():
        return []
    found = []
    kept = (f"{KEPT}/{KEPT_FILE}", f"{KEPT}/{KEPT_FILE}.tmp")
    for pattern in (PARTY_CHECKPOINT, PARTY_CHECKPOINT + ".tmp", EVENTS, *kept):
        found += [p for p in folder.rglob(pattern) if p.is_file() and PREVIOUS not in p.relative_to(folder).parts]
    return sorted(found)


def not_ours(root: Path, parties_only: bool = False) -> tuple[Path, str] | None:
    """The first thing under ``root`` at a path the suite writes to that the suite did not write (a directory, or
    a file without the mark of its kind: a torch checkpoint is a zip, results.json a JSON object), and what it is.
    ``parties_only``: ``root`` is a folder of parties' files (``parties/`` or a ``transport.party_dirs`` root)."""
    parties = root if parties_only else root / PARTIES
    places = [] if parties_only else [root / RESULTS, root / CHECKPOINT]
    if parties.is_dir():
        places += sorted(parties.glob(f"*/{PARTY_CHECKPOINT}"))
    for folder in [parties] if parties_only else [root / "tensorboard", parties]:
        if folder.is_dir():
            places += sorted(folder.rglob(EVENTS))
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


def link_in(root: Path, parties_only: bool = False) -> Path | None:
    """The first symbolic link where the suite keeps its outputs under ``root`` (None if there is none)."""
    if parties_only:
        names, folders = (), [root]
    else:
        names, folders = (LOCK, RESULTS, RESULTS + ".tmp", *OWN_FOLDERS), OWN_FOLDERS
    for name in names:
        if (root / name).is_symlink():
            return root / name
    for folder in folders:
        for where, dirs, files in os.walk(root / folder):  # never follows a link
            for name in sorted(dirs + files):
                if (Path(where) / name).is_symlink():
                    return Path(where) / name
    return None


# what a record names of the software it ran with (results.json's "versions", benchmarks' versions.json)
RECORDED_PACKAGES = ("torch", "torchvision", "pytorch-lightning", "torchmetrics", "numpy", "scipy", "scikit-learn",
    "pyarrow", "grpcio", "cryptography", "pynacl", "phe", "dp-accounting", "ray", "xgboost-cpu", "xgboost")  # fmt: skip


def versions() -> dict:
    """Python's version, the machine and the version of each of ``RECORDED_PACKAGES`` installed here (the lock,
    ``requirements.lock``, names all of them; a package not installed is left out)."""
    packages = {}
    for name in RECORDED_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"python": platform.python_version(), "machine": f"{platform.system()} {platform.machine()}",
            "packages": packages}  # fmt: skip


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


class Root:
    """One place a run writes to: ``--out`` (its whole layout) or a root of ``transport.party_dirs`` (parties' files
    only), with what was there before the run and whether an ``--overwrite`` set its previous outputs aside."""

    def __init__(self, path: Path, parties_only: bool):
        self.path, self.parties_only = Path(path), parties_only
        self.name = f"transport.party_dirs {self.path}" if parties_only else f"--out {self.path}"
        self.before: set[Path] = set()  # files and directories there before this run
        self.existed = False
        self.replacing = False  # an --overwrite whose previous outputs wait in PREVIOUS

    def outputs(self, root: Path | None = None) -> list[Path]:
        """The suite's files under ``root`` (default: this root), in this root's layout."""
        root = self.path if root is None else root
        return party_outputs(root) if self.parties_only else own_outputs(root)

    def check(self, resume: bool, overwrite: bool) -> None:
        """One sentence if the run cannot write here (see :meth:`RunDirectory.check`)."""
        p, name = self.path, self.name
        if p.is_symlink() and not p.is_dir():
            broken = "nothing" if not p.exists() else "a file"
            raise VCLInputError(f"{name} is a symbolic link to {broken}; give a directory path.")
        for parent in [p, *p.parents]:
            if parent.exists() and not parent.is_dir():
                where = "is a file" if parent == p else f"is under the file {parent}"
                raise VCLInputError(f"{name} {where}; give a directory path for the run.")
            if parent.is_dir():
                if not os.access(parent, os.W_OK | os.X_OK):
                    raise VCLInputError(
                        f"{name}: {parent} is not writable (permissions or a read-only filesystem); "
                        "choose a writable directory."
                    )
                break
        if not p.is_dir():
            return
        link = link_in(p, self.parties_only)
        if link is not None:
            raise VCLInputError(
                f"{name}: {link} is a symbolic link, and vcl never writes, replaces or removes its outputs "
                "through a link; put the real directory or file in its place, or choose another directory."
            )
        foreign = not_ours(p, self.parties_only)
        if foreign is not None:
            raise VCLInputError(
                f"{name}: {foreign[0]} is {foreign[1]}, which vcl did not write, where the run writes its own; "
                "move it away or choose another directory."
            )
        folders = _folders(p) if self.parties_only else [p, *(q for n in OWN_FOLDERS for q in _folders(p / n))]
        for folder in folders:
            if not os.access(folder, os.W_OK | os.X_OK):
                raise VCLInputError(
                    f"{name}: {folder} is not writable (permissions or a read-only filesystem), and the run writes "
                    "there; make it writable or choose another directory."
                )
        if resume or overwrite:
            return
        if self.parties_only:
            held = [str(q.relative_to(p)) for q in sorted(party_outputs(p), key=lambda q: q.suffix != ".ckpt")]
            what = "parties' checkpoints"
        else:
            held, what = sorted(str(q.relative_to(p)) for q in p.iterdir() if q.name != LOCK), "files"
        if held:
            shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
            raise VCLInputError(
                f"{name} already holds {what} ({shown}); continue that run with --resume, replace the suite's "
                "own outputs with --overwrite (other files are kept), or choose another directory."
            )

    def enter(self) -> None:
        self.existed = self.path.is_dir()
        self.before = set(self.path.rglob("*")) if self.existed else set()

    def set_aside(self) -> None:
        """``--overwrite``: the previous run's outputs into PREVIOUS (or, if an earlier replacement never completed,
        its outputs go and the run it was replacing stays set aside)."""
        previous = self.path / PREVIOUS
        if previous.is_dir():
            for f in self.outputs():
                f.unlink()
        else:
            for f in self.outputs():
                aside = previous / f.relative_to(self.path)
                aside.parent.mkdir(parents=True, exist_ok=True)
                os.replace(f, aside)
        self.replacing = previous.is_dir()
        self.before = set(self.path.rglob("*")) if self.path.is_dir() else set()

    def take_back(self) -> None:
        """Remove what this run wrote here, put the outputs it was replacing back, remove the folders it made."""
        for f in self.outputs():
            if f not in self.before:
                f.unlink()
        previous = self.path / PREVIOUS
        if self.replacing and previous.is_dir():
            for f in self.outputs(previous):
                back = self.path / f.relative_to(previous)
                back.parent.mkdir(parents=True, exist_ok=True)
                os.replace(f, back)
            _remove_empty_dirs(previous)
        if self.path.is_dir():
            made = [q for q in self.path.rglob("*") if q.is_dir() and q not in self.before]
            for d in sorted(made, key=lambda q: len(q.parts), reverse=True):
                if not any(d.iterdir()):
                    d.rmdir()
            if self.parties_only and not self.existed and not any(self.path.iterdir()):
                self.path.rmdir()

    def clear_previous(self) -> None:
        previous = self.path / PREVIOUS
        if previous.is_dir() and not previous.is_symlink():
            for f in self.outputs(previous):
                f.unlink()
            _remove_empty_dirs(previous)


class RunDirectory:
    """``--out`` for one run, and the roots of ``transport.party_dirs`` that the parties write to on this machine:
    :meth:`check` before data loading, then ``with`` it around the run and :meth:`begin` once the data and the
    protocol are built."""

    def __init__(self, path: Path, resume: bool = False, overwrite: bool = False, party_roots=()):
        self.path, self.resume, self.overwrite = Path(path), resume, overwrite
        self._lock = None
        self._lock_existed = False
        self._created: list[Path] = []  # directories this run made, deepest last
        own = os.path.abspath(self.path / PARTIES)
        extra = dict.fromkeys(Path(r) for r in party_roots if r and os.path.abspath(r) != own)
        self.roots = [Root(self.path, parties_only=False), *(Root(r, parties_only=True) for r in extra)]

    # --- before any work -------------------------------------------------------------------------------
    def check(self) -> None:
        """One sentence, before anything is loaded, if ``--out`` (or a party's own root) cannot hold this run: a
        file or an unwritable folder in the way, a symbolic link where the suite writes, a file or folder the suite
        did not write at one of its paths, or a previous run's outputs without ``--resume`` / ``--overwrite``."""
        for root in self.roots:
            try:
                root.check(self.resume, self.overwrite)
            except OSError as err:  # a name too long, a loop of links, ...
                raise VCLInputError(f"{root.name} cannot be used ({err.strerror}); choose another.") from None

    # --- for the run's lifetime ----------------------------------------------------------------------------
    def __enter__(self) -> RunDirectory:
        from filelock import FileLock, Timeout

        missing = [q for q in [self.path, *self.path.parents] if not q.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._created = list(reversed(missing))
            for root in self.roots:
                root.enter()
            self._lock_existed = (self.path / LOCK).exists()
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
        for root in self.roots:
            if self.overwrite and not self.resume:
                root.set_aside()

    def __exit__(self, kind, error, tb) -> None:
        try:
            self._finish(kind)
        except OSError:  # the directory went away under the run: nothing left to tidy
            pass
        if self._lock is not None:
            self._lock.release()
            if kind is not None and not self._lock_existed:
                (self.path / LOCK).unlink(missing_ok=True)
        if kind is not None:
            self._remove_created_dirs()

    def _finish(self, kind) -> None:
        saved = (self.path / CHECKPOINT).is_file()
        resumable = kind is not None and issubclass(kind, (KeyboardInterrupt, PartyLost)) and saved
        # an input refused, or memory exhausted, once the rounds met the data: nothing to resume
        refused = kind is not None and issubclass(kind, (VCLInputError, OutOfMemory)) and not self.resume
        for root in self.roots:
            if kind is None:
                root.clear_previous()
            elif not saved or refused or (root.replacing and not resumable):
                # failed before any round was saved, refused an input it met during the rounds, or a replacement
                # failed: take back what this run wrote and put the outputs it was replacing back
                root.take_back()

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
