"""Event files: how a log reopened after a resume is read after the files the interrupted run wrote."""

from __future__ import annotations

import time
from pathlib import Path


def after_last_event_file(folder) -> None:
    """TensorBoard reads a log's event files in name order, and a name starts with the second the file was
    made in (then host, process and a counter, compared as text): a log reopened within the second its last
    file was made (a resume straight after a crash) waits for the next second, so its file is read last."""
    stamps = [int(p.name.split(".")[3]) for p in Path(folder).glob("events.out.tfevents.*")]
    wait = max(stamps, default=0) + 1 - time.time()
    if wait > 0:
        time.sleep(wait)
