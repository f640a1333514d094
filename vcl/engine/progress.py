"""A progress bar over a round's local training, on the console of the process that trains: learners call
:func:`advance` once per epoch, which does nothing outside the runner's :func:`round_bar` (a verbose run on a
terminal). Under ``run.engine: trainer`` Lightning's bar shows instead."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

_advance = None  # the open bar's advance(epochs), or None


def active() -> bool:
    """Whether a round's bar is open in this process."""
    return _advance is not None


def advance(epochs: int = 1) -> None:
    """``epochs`` model-epochs of local training are done (nothing if no bar is open)."""
    if _advance is not None:
        _advance(epochs)


@contextmanager
def round_bar(label: str, enabled: bool = True, console=None) -> Iterator[None]:
    """A transient bar (spinner, label, model-epochs done, elapsed time) while the body runs."""
    global _advance
    if not enabled:
        yield
        return

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed} epochs"))
    with Progress(*columns, TimeElapsedColumn(), transient=True, console=console) as bar:
        task = bar.add_task(label, total=None)
        _advance = lambda n: bar.advance(task, n)  # noqa: E731
        try:
            yield
        finally:
            _advance = None
