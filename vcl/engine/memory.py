"""How a training process asks for memory: freed tensors' memory is kept and reused, not mapped afresh.
Every process that trains calls :func:`prepare_process` once at start; why, and what it saves: docs/design.md
("Memory during the rounds") and docs/development.md."""

from __future__ import annotations

import ctypes
import os
import sys
import time

import pyarrow as pa

MARKS: list[dict] = []  # this process's steps as they end (:func:`mark`), in order
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's largest: blocks below it come from the heap
TRIM_THRESHOLD = 128 << 20  # freed memory kept at the heap's top before any is returned to the kernel


def reuse_freed_memory() -> bool:
    """Set glibc malloc's thresholds (``MMAP_THRESHOLD``, ``TRIM_THRESHOLD``) and one arena per core (two at least)
    for this process; True if it took effect. Elsewhere (macOS, Windows, musl) nothing changes and it returns False.
    Process-wide and cheap; calling it again is harmless."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    arenas = mallopt(M_ARENA_MAX, max(2, os.cpu_count() or 1)) == 1
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and arenas


class _NoPandas:
    """A finder that refuses pandas (while pyarrow probes for it, :func:`answer_pandas_probe`)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            raise ImportError("pandas is not needed here")
        return None


def answer_pandas_probe() -> None:
    """pyarrow's first conversion of a Python value imports pandas to ask whether it is a pandas object; vcl hands
    pyarrow none, so the probe is answered here, once, pandas absent (``import pandas`` still works; no-op if done)."""
    if "pandas" in sys.modules:
        return

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # the probe: pyarrow finds no pandas, and does not look again
    finally:
        sys.meta_path.remove(finder)


def prepare_process() -> bool:
    """What a process that reads data and trains does first: :func:`reuse_freed_memory` (its result) and
    :func:`answer_pandas_probe`."""
    applied = reuse_freed_memory()
    answer_pandas_probe()
    return applied


def _status_bytes(key: str) -> int | None:
    """A ``/proc/self/status`` figure in bytes (``VmRSS``: resident now; ``VmHWM``: the peak so far), or None where
    there is none (not Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def mark(step: str) -> None:
    """Note that ``step`` ended now: the wall clock, the memory this process holds and its peak so far, appended to
    :data:`MARKS` (results.json's ``memory``). Nothing is reset, so a peak measured from outside stays whole."""
    rss = _status_bytes("VmRSS")
    if rss is not None:
        MARKS.append({"step": step, "time": time.time(), "rss": rss, "peak": _status_bytes("VmHWM")})
