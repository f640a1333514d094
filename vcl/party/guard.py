"""What a party that faces the network does before it reads a request: who calls (the one subject alternative name
of the certificate the federation's CA signed), how many calls one caller may have at once, how long a request's
next piece may take, the run it serves, one line of its log for each refused or failed request, and what of a
refusal's sentence goes back (:mod:`vcl.party.server` serves the operations)."""

from __future__ import annotations

import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from vcl.errors import first_line
from vcl.party.limits import log


@dataclass
class Session:
    """The run a party serves: its coordinator's name for it, when its coordinator last asked, and whether it ended."""

    id: str
    name: str
    deadline: float
    last: float = field(default_factory=time.monotonic)
    ended: bool = False

    def in_progress(self) -> bool:
        return not self.ended and time.monotonic() - self.last < self.deadline


class Guard:
    """The checks :class:`vcl.party.server.PartyServer` makes on every call, around its operations; ``settings``: the
    party's own (:class:`vcl.party.settings.PartySettings`)."""

    def __init__(self, settings):
        self.settings = settings
        self.limit = int(settings.max_message_mb * 2**20)
        self._calls: dict[str, int] = {}  # calls in progress, per caller
        self._calls_lock = threading.Lock()

    def note(self, context, who: str, op: str, what: str, at: str = "") -> None:
        """One line of the party's log (standard error): the caller's name and address (``at``, for a call that
        no longer has one), the operation, and what became of it (one line, cut at 400 characters)."""
        caller = f"{who or 'no one'} at {at or context.peer()}"
        log(self.settings.name, f"{op} from {caller}: {first_line(what)}")

    def refuse(self, context, code, who: str, op: str, text: str, quiet: bool = False) -> None:
        """Refuse the call with ``code``: ``text`` whole in the log, its first line back to the caller (``quiet``:
        with every quoted value left out, for what tells of the party's own data)."""
        self.note(context, who, op, f"refused ({code.name}): {text}")
        back = redacted(first_line(text)) if quiet else first_line(text)
        context.abort(code, f"{self.settings.name}: {back[:300]}")

    # --- who may ask what ---
    def caller(self, context) -> str:
        """The organization the client certificate names in its one subject alternative name (the CA checked it
        during the handshake): the name the coordinator checks on a party's certificate too, whatever the common
        name says. A certificate with no or several such names is no one."""
        names = context.auth_context().get("x509_subject_alternative_name") or []
        return names[0].decode(errors="replace") if len(names) == 1 else ""

    @contextmanager
    def slot(self, who: str, op: str, context):
        """One of the ``calls_per_peer`` calls ``who`` may have in progress at once; more are refused at once."""
        import grpc

        with self._calls_lock:
            busy = self._calls.get(who, 0) >= self.settings.calls_per_peer
            if not busy:
                self._calls[who] = self._calls.get(who, 0) + 1
        if busy:
            self.refuse(context, grpc.StatusCode.RESOURCE_EXHAUSTED, who, op,
                        f"it serves at most {self.settings.calls_per_peer} calls at once from {who}")  # fmt: skip
        try:
            yield
        finally:
            with self._calls_lock:
                self._calls[who] -= 1

    def receive(self, op: str, stream, context, who: str) -> bytes | None:
        """The request's frame; None if the call was cancelled (by its caller, or here when its next piece did not
        come within ``stall_s``, so that a silent peer holds none of the party's threads longer)."""
        import grpc

        from vcl.transports.wire import FrameTooLarge, joined

        stalled, done, at = threading.Event(), threading.Event(), context.peer()
        last, timer = [time.monotonic()], [None]

        def check():  # one watchdog thread per call, re-armed only when it wakes early (not one per piece)
            idle = time.monotonic() - last[0]
            if done.is_set():
                return
            if idle < self.settings.stall_s:
                arm(self.settings.stall_s - idle)
            else:
                stalled.set()
                context.cancel()

        def arm(seconds: float):
            timer[0] = threading.Timer(seconds, check)
            timer[0].daemon = True
            timer[0].start()

        def watched():
            for piece in stream:
                last[0] = time.monotonic()
                yield piece

        arm(self.settings.stall_s)
        late = f"cancelled: its next piece did not come within stall_s={self.settings.stall_s:g} s"
        try:
            frame = joined(watched(), self.limit)
            if not stalled.is_set():
                return frame
            self.note(context, who, op, late, at)  # a cancelled call's stream may just end
            return None
        except FrameTooLarge:
            self.refuse(context, grpc.StatusCode.RESOURCE_EXHAUSTED, who, op,
                        f"it accepts frames of at most {self.settings.max_message_mb:g} MiB")  # fmt: skip
        except grpc.RpcError:
            self.note(context, who, op, late if stalled.is_set() else "its caller cancelled it", at)
            return None
        finally:
            done.set()
            timer[0].cancel()


def redacted(text: str) -> str:
    """``text`` with every quoted value left out: what a party's data were refused for goes back to the
    coordinator without a cell, a column name or an ID of them (the party's log has the whole sentence)."""
    return re.sub(r"'[^']*'|\"[^\"]*\"", "…", text)


def raise_open_files_limit() -> None:
    """The most connections this process may hold: its soft limit of open files raised to the hard one (a party
    at its limit cannot accept the coordinator's connection)."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # an unlimited hard limit the kernel caps lower: keep the soft one
        pass
