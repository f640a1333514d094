"""A party's limits on the connections it holds, as gRPC's own server options, and its writer threads' errors as one
line of its log (:mod:`vcl.party.server` serves with them; docs/deployment.md states the bound they give)."""

from __future__ import annotations

import resource
import sys
import time

from vcl.errors import first_line
from vcl.party.settings import PartySettings

FILES_KEPT = 64  # open files a party keeps for its own beside its connections (connection_cap)
KEEPALIVE_S = 60.0  # a party pings each connection's peer after this long without a frame from it...
PING_TIMEOUT_S = 20.0  # ...and closes the connection if the peer does not answer within this


def connection_options(settings: PartySettings) -> list[tuple[str, int]]:
    """gRPC's own limits on the connections a party holds (its server's channel arguments), from its config: at most
    :func:`connection_cap` at once (more are closed as they arrive), each closed once it has not finished its TLS
    handshake within ``handshake_s``, has had no call for ``idle_s``, or is ``connection_age_s`` old (then a call in
    progress finishes on it, and its owner's next call opens a new one), or when its peer does not answer a ping
    within :data:`PING_TIMEOUT_S` (a machine that went away). gRPC's Python server has no limit per peer address
    (docs/deployment.md says what to put in front of the port)."""
    return [
        ("grpc.max_allowed_incoming_connections", connection_cap(settings.max_connections)),
        ("grpc.server_handshake_timeout_ms", int(settings.handshake_s * 1000)),  # TCP without TLS: closed
        ("grpc.max_connection_idle_ms", int(settings.idle_s * 1000)),  # a connection with no call: closed
        ("grpc.max_connection_age_ms", int(settings.connection_age_s * 1000)),  # a caller that keeps calling too
        ("grpc.keepalive_time_ms", int(KEEPALIVE_S * 1000)),  # its ping to each connection's peer...
        ("grpc.keepalive_timeout_ms", int(PING_TIMEOUT_S * 1000)),  # ...which must answer within this
    ]


def connection_cap(wanted: int) -> int:
    """The most connections a party holds at once: ``wanted`` (its ``max_connections``), or fewer where its limit of
    open files leaves less beside the :data:`FILES_KEPT` it keeps for its own files (checkpoints, logs, its links to
    other parties): a party never runs out of files to open, however many connections come."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FILES_KEPT))


def one_line(name: str, args) -> None:
    """A thread's error (a TensorBoard writer's failed write, when the party's folder went away) as one line of the
    party's log, not its traceback: the request that meets it next says what it means."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    thread = args.thread.name if args.thread is not None else "a thread"
    sys.stderr.write(f"{stamp} {name}: {thread} failed: {args.exc_type.__name__}: {first_line(args.exc_value)}"[:400])
    sys.stderr.write("\n")
    sys.stderr.flush()
