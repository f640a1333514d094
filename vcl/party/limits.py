"""A party's limits on the connections it holds, as gRPC's own server options; the watch that logs each wave of
connections its cap sheds; its writer threads' errors as one line of its log (:mod:`vcl.party.server` serves with
them; docs/deployment.md states the bound they give)."""

from __future__ import annotations

import os
import resource
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from vcl.errors import first_line
from vcl.party.settings import PartySettings

FILES_KEPT = 64  # open files a party keeps for its own beside its connections (connection_cap)
MOST_CONNECTIONS = 65536  # the cap where the open-files limit is unlimited (and the largest max_connections)
WATCH_S = 1.0  # how often the watch counts the connections a party holds
KEEPALIVE_S = 60.0  # a party pings each connection's peer after this long without a frame from it...
PING_TIMEOUT_S = 20.0  # ...and closes the connection if the peer does not answer within this


def connection_options(settings: PartySettings) -> list[tuple[str, int]]:
    """gRPC's own limits on a party's connections (its server's channel arguments), from its config: at most
    :func:`connection_cap`, each closed after ``handshake_s`` without TLS, ``idle_s`` without a call, at age
    ``connection_age_s``, or when a ping goes unanswered (:data:`PING_TIMEOUT_S`). None per peer address."""
    return [
        ("grpc.max_allowed_incoming_connections", connection_cap(settings.max_connections)),
        ("grpc.server_handshake_timeout_ms", int(settings.handshake_s * 1000)),  # TCP without TLS: closed
        ("grpc.max_connection_idle_ms", int(settings.idle_s * 1000)),  # a connection with no call: closed
        ("grpc.max_connection_age_ms", int(settings.connection_age_s * 1000)),  # a caller that keeps calling too
        ("grpc.keepalive_time_ms", int(KEEPALIVE_S * 1000)),  # its ping to each connection's peer...
        ("grpc.keepalive_timeout_ms", int(PING_TIMEOUT_S * 1000)),  # ...which must answer within this
    ]


def connection_cap(wanted: int = 0) -> int:
    """The most connections a party holds at once: its open-files limit less the :data:`FILES_KEPT` it keeps for its
    own files, so it never runs out of files to open; ``wanted`` (its ``max_connections``, 0: none) caps it lower."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = MOST_CONNECTIONS if soft == resource.RLIM_INFINITY else soft - FILES_KEPT
    return max(1, min(wanted or room, room))


def held_by_source(port: int) -> Counter | None:
    """The TCP connections established to this machine's ``port``, counted by their source address, as the kernel
    lists them (``/proc/net/tcp`` and ``tcp6``); None where it lists none (not Linux)."""
    held, listed, local = Counter(), False, f":{port:04X} "
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        listed = True
        for line in lines:
            if local not in line:  # most lines, cheaply: neither end is this port
                continue
            fields = line.split()  # the local address:port, the remote one, the state (01: established)
            if len(fields) > 3 and fields[3] == "01" and fields[1].endswith(local.strip()):
                held[_address(fields[2].rsplit(":", 1)[0])] += 1
    return held if listed else None


def open_files() -> int:
    """The files this process holds open (its connections among them); a large number where it cannot tell."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return MOST_CONNECTIONS


def _address(hexed: str) -> str:
    """An address as /proc/net/tcp writes it (32-bit words in the machine's order) in its usual form."""
    raw = bytes.fromhex(hexed)
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)) if sys.byteorder == "little" else raw
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw)
    if raw[:12] == b"\0" * 10 + b"\xff\xff":  # an IPv4 peer of an IPv6 socket
        return socket.inet_ntop(socket.AF_INET, raw[12:])
    return socket.inet_ntop(socket.AF_INET6, raw)


def sources(held: Counter, most: int = 5) -> str:
    """``127.0.0.2 ×100, 127.0.0.1 ×2`` (the ``most`` largest, then how many more addresses)."""
    named = ", ".join(f"{a} ×{n}" for a, n in held.most_common(most))
    return named + (f" and {len(held) - most} more addresses" if len(held) > most else "")


class CapWatch(threading.Thread):
    """Counts the connections a party holds on its ``port`` every :data:`WATCH_S` (once it holds ``cap`` open files) and
    logs each wave its ``cap`` sheds, which gRPC does silently: its start (who holds the places) and end (how long, the
    most held, from where). Where the kernel lists no connections (not Linux) it logs that once and stops."""

    def __init__(self, name: str, port: int, cap: int, every: float = WATCH_S):
        super().__init__(name=f"{name}-connection-watch", daemon=True)
        self.party, self.port, self.cap, self.every = name, port, cap, every
        self.stopped = threading.Event()

    def run(self) -> None:
        wave: dict | None = None
        while not self.stopped.wait(self.every):
            if wave is None and open_files() < self.cap:  # cheaply: too few files open to hold the cap
                continue
            held = held_by_source(self.port)
            if held is None:
                return log(self.party, "cannot count its connections on this system: waves its cap sheds go unlogged")
            count = sum(held.values())
            if count >= self.cap and wave is None:
                wave = {"start": time.monotonic(), "most": count, "held": held}
                log(self.party, f"at its connection cap ({count} of {self.cap} held): new connections are closed as "
                                f"they come; held by {sources(held)}")  # fmt: skip
            elif wave is not None and count >= self.cap:
                wave["held"] |= held  # the most each address held at once
                wave["most"] = max(wave["most"], count)
            elif wave is not None:
                log(self.party, f"below its connection cap again after {time.monotonic() - wave['start']:.0f} s "
                                f"(a wave: at most {wave['most']} held, by {sources(wave['held'])})")  # fmt: skip
                wave = None

    def stop(self) -> None:
        self.stopped.set()


def log(name: str, line: str) -> None:
    """One line of the party's log (standard error), stamped, cut at 400 characters, in one write (lines of calls at
    once do not mix)."""
    sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {name}: {line}"[:400] + "\n")
    sys.stderr.flush()


def one_line(name: str, args) -> None:
    """A thread's error (a TensorBoard writer's failed write, when the party's folder went away) as one line of the
    party's log, not its traceback: the request that meets it next says what it means."""
    thread = args.thread.name if args.thread is not None else "a thread"
    log(name, f"{thread} failed: {args.exc_type.__name__}: {first_line(args.exc_value)}")
