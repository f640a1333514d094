"""Organizations on their own machines: the coordinator dials each party over gRPC with mutual TLS
(``transport.kind: grpc``; docs/deployment.md).

Wire frames cross in pieces of at most ``transport.chunk_mb``. A call that finds the party unreachable before it sent
anything is tried again (``transport.retries``); one that fails after its request left ends the run
(:class:`vcl.errors.PartyLost`): a request is never sent twice, since a party's state moves with each one."""

from __future__ import annotations

import hashlib
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vcl.config import party_copy
from vcl.datamodules.tabular import VerticalData
from vcl.errors import PartyFailed, PartyLost, VCLInputError, regular_file
from vcl.messages import Message, MessageRecord
from vcl.transport import Parties, Transport
from vcl.transports.certs import check_pems
from vcl.transports.wire import (
    CHUNK_MB,
    SERVICE,
    FrameTooLarge,
    joined,
    pack,
    pack_message,
    party_ids,
    pieces,
    unpack,
    unpack_message,
)

# a party that holds as many connections as it takes closes a new one as it comes; the coordinator tries again for a
# while (FULL_WAIT_S: longer than a party's handshake_s, so a wave of connections without TLS only delays it)
CLOSED = "it closed the connection as it came"
FULL_WAIT_S = 15.0
# safe to send again: the calls, and the runtime's requests (vcl.messages.RuntimeRequest) that change nothing twice
IDEMPOTENT = {"Hello", "Setup", "PSI", "Where", "Save", "Load", "Prune", "OpenLogs"}


class Link:
    """One mutually authenticated gRPC channel to the party ``name`` at ``address``; ``tls``: own ``ca``, ``cert``
    and ``key`` PEM files. The server's certificate must name ``name`` (TLS host name check against it). Frames
    go and come back as streams of pieces of at most ``chunk`` bytes, ``limit`` bytes in all; a call waits
    ``deadline`` seconds, which ``deadline_is`` says in words (the setting it comes from) when a party does not
    answer in time."""

    def __init__(
        self,
        name: str,
        address: str,
        tls: dict,
        limit: int,
        deadline: float,
        retries: int = 3,
        chunk: int = int(CHUNK_MB * 2**20),
        deadline_is: str | None = None,
    ):
        import grpc

        self.name, self.address, self.limit, self.chunk = name, address, limit, chunk
        self.deadline, self.retries = deadline, retries
        self.deadline_is = deadline_is or f"transport.deadline={deadline:g} s"
        ca, cert, key = (Path(tls[k]).read_bytes() for k in ("ca", "cert", "key"))
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        options = [
            ("grpc.ssl_target_name_override", name),
            ("grpc.default_authority", name),
            ("grpc.max_receive_message_length", min(limit + 2**16, 2**31 - 1)),  # the party's pieces, any size
            ("grpc.max_send_message_length", chunk + 2**16),
            # no retry policy, so gRPC retries only what no party saw (a call that met a connection the party was
            # closing: its max_connection_age); a request a party took is never sent again (the module's text)
            ("grpc.enable_retries", 1),
            ("grpc.initial_reconnect_backoff_ms", 200),  # a party that closed connections is dialled again soon...
            ("grpc.max_reconnect_backoff_ms", 2000),  # ...and never minutes later (gRPC's default: up to 120 s)
        ]
        self.channel = grpc.secure_channel(address, creds, options=options)

    def call(
        self, op: str, frame: bytes, during: str = "start-up", timeout: float | None = None, what: str | None = None
    ) -> bytes:
        """The party's answer to ``op`` with ``frame`` (within ``timeout`` seconds, by default the deadline; a
        shorter one is tried once); one sentence (PartyLost, VCLInputError) if there is none, naming ``what`` was
        asked (by default ``op``; a Handle: the message's kind)."""
        import grpc

        method = self.channel.stream_stream(f"/{SERVICE}/{op}")
        retries = self.retries if timeout is None else 0
        op = what or op
        attempt, full_until = 0, None
        while True:
            try:
                return joined(method(pieces(frame, self.chunk), timeout=timeout or self.deadline), self.limit)
            except FrameTooLarge:
                raise VCLInputError(
                    f"party {self.name} at {self.address}: its answer to {op} is over the size limit "
                    f"({self.limit} bytes); raise transport.max_message_mb."
                ) from None
            except grpc.RpcError as err:
                error = self.error(op, err.code(), (err.details() or "").strip(), during)
                if isinstance(error, PartyLost) and err.code() == grpc.StatusCode.UNAVAILABLE:
                    if attempt < retries and op in IDEMPOTENT:
                        time.sleep(min(0.2 * 2**attempt, 2.0))
                        attempt += 1
                        continue
                    if error.reason.startswith(CLOSED) and timeout is None:  # at its max_connections: nothing sent
                        full_until = full_until or time.monotonic() + min(self.deadline, FULL_WAIT_S)
                        if time.monotonic() < full_until:
                            time.sleep(0.5)
                            continue
                raise error from None

    def error(self, op: str, code, details: str, during: str) -> Exception:
        """One sentence for a call that failed: the party refused it (input error), the party answered that it
        failed it, a peer it relayed to was lost, or the party stopped (:class:`PartyLost`)."""
        import grpc

        where = f"party {self.name} at {self.address}"
        lowered = details.lower()
        if (
            code == grpc.StatusCode.UNAVAILABLE
            and "socket closed" in lowered
            and "handshake" in lowered
            and not any(w in lowered for w in ("certificate", "ssl", "tls", "peer name", "verification", "alert"))
        ):  # closed before its TLS handshake began: a party that holds every connection it takes closes new ones
            why = f"{CLOSED} (it holds every connection it takes: its max_connections, or it is stopping)"
            return PartyLost(self.name, during, why, happened="did not answer")
        if code == grpc.StatusCode.UNAVAILABLE and any(
            w in lowered for w in ("handshake", "certificate", "ssl", "tls", "peer name", "verification")
        ):
            return VCLInputError(
                f"{where}: the TLS handshake failed ({details[:160]}); check that its certificate names {self.name!r} "
                "and that both sides use the federation's ca.pem (if they do, the party may be out of connections: "
                "its log says)."
            )
        if code in (
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.ALREADY_EXISTS,
        ):
            return VCLInputError(f"{where} refused the {op} request: {details[:300].rstrip('.')}.")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            if "calls at once" in details:
                return VCLInputError(f"{where} refused the {op} request: {details[:300].rstrip('.')}.")
            return VCLInputError(
                f"{where}: a {op} frame is over the size limit ({details[:160]}); raise transport.max_message_mb "
                "on both sides (the party's max_message_mb too), and keep transport.chunk_mb within its chunk_mb."
            )
        if code == grpc.StatusCode.ABORTED and ": peer " in details:  # a party it relayed to
            head, _, reason = details.partition(": peer ")[2].partition(": ")
            peer, _, happened = head.partition(" ")  # "org2 did not answer", as the relaying party said it
            return PartyLost(peer, during, reason[:300] or "it did not take a message", happened=happened or "stopped")
        if code == grpc.StatusCode.INTERNAL:
            return PartyFailed(self.name, during, op, details[:300])
        if code == grpc.StatusCode.FAILED_PRECONDITION:  # the party holds no run
            if during == "start-up":  # it was never set up by this run: its Setup was refused or did not reach it
                return PartyLost(self.name, during, "its Setup was refused or did not reach it (the sentence before "
                                 "this one, or the party's log, says why); it still serves: set it up again",
                                 happened="holds no run")  # fmt: skip
            return PartyLost(self.name, during, "it restarted and holds no run; --resume sets it up again")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return PartyLost(self.name, during, f"no answer came within {self.deadline_is} (it is busy, or holds "
                             "every connection it takes: its max_connections)", happened="did not answer")  # fmt: skip
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
            why = f"nothing answers at {self.address} (it is down, out of reach, or holds every connection it takes)"
            return PartyLost(self.name, during, why, happened="did not answer")
        return PartyLost(self.name, during, f"its {op} failed ({code.name}: {details[:160]})")

    def ask(self, op: str, body=None, during: str = "start-up", timeout: float | None = None):
        """``op`` with arguments ``body`` (plain data); the party's answer as plain data."""
        _, value = unpack(self.call(op, pack(op, body), during, timeout), self.limit)
        return value

    def handle(self, message: Message, during: str = "start-up") -> Message:
        """The party's reply to ``message`` (a request for its runtime, :class:`vcl.messages.RuntimeRequest`: its
        runtime's)."""
        return unpack_message(self.call("Handle", pack_message(message), during, what=message.kind), self.limit)

    def close(self) -> None:
        self.channel.close()


def links(config, names: list[str]) -> dict[str, Link]:
    """A link to each party named, from ``transport.addresses`` (by name) and the coordinator's TLS files."""
    t = config.transport
    missing = [n for n in names if n not in t.addresses]
    if missing:
        raise VCLInputError(
            f"transport.addresses gives no host:port for party {missing[0]} (the run's parties: {', '.join(names)}); "
            f"add {missing[0]}: <host>:<port>."
        )
    check_settings(config)
    tls = {"ca": t.tls_ca, "cert": t.tls_cert, "key": t.tls_key}
    limit, chunk = int(t.max_message_mb * 2**20), int(t.chunk_mb * 2**20)
    return {n: Link(n, t.addresses[n], tls, limit, t.deadline, t.retries, chunk) for n in names}


def check_settings(config) -> None:
    """The coordinator's TLS files exist and every party's address is host:port (one sentence each, before any
    work)."""

    t = config.transport
    for key in ("tls_ca", "tls_cert", "tls_key"):
        if not getattr(t, key):
            raise VCLInputError(
                f"transport.kind=grpc needs transport.{key}: a PEM file (python -m vcl.transports.certs)."
            )
        regular_file(
            Path(getattr(t, key)), f"transport.{key}", "make the federation's files with python -m vcl.transports.certs"
        )

    check_pems(t.tls_ca, t.tls_cert, t.tls_key, ("transport.tls_ca", "transport.tls_cert", "transport.tls_key"))
    for address in t.addresses.values():
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise VCLInputError(f"transport.addresses: {address!r} is not host:port; e.g. bob.example.org:50052.")


def in_parallel(calls: list, lost_in_place: bool = False) -> list:
    """Run ``calls`` (no-argument functions, one per party) at once; their results in order, the first error
    raised (``lost_in_place``: a :class:`PartyLost` stands in its party's place instead, for
    :meth:`vcl.errors.Missing.tolerate`)."""

    def result(run):
        try:
            return run()
        except PartyLost as err:
            if not lost_in_place:
                raise
            return err

    if len(calls) == 1:
        return [result(calls[0])]
    with ThreadPoolExecutor(len(calls)) as pool:
        running = [pool.submit(result, c) for c in calls]
        return [r.result() for r in running]


class GrpcTransport(Transport):
    """The parties on their own machines, reached through :class:`Link`; ``request_all`` asks them at once."""

    apart = True

    @classmethod
    def open(cls, config, method: str, data, parties: Parties) -> GrpcTransport:
        return cls(config, method, parties.names, data)

    @classmethod
    def check(cls, config) -> None:
        check_settings(config)

    @classmethod
    def psi_answers(cls, config, names: list[str], drop: list[bool], offer, new: bool = False) -> list[dict]:
        return psi_answers(config, names, drop, offer, new)

    def __init__(self, config, method: str, names: list[str], data, channel=None):
        super().__init__(names, channel, skip_missing=config.run.missing_parties == "skip")
        self.config = config
        self._links = links(config, names)
        self._during = "round 0"
        book = {n: config.transport.addresses[n] for n in names}
        self.run = run_name(config)
        setup = {
            "run": self.run,
            "config": party_copy(config.to_dict(), None),  # no secret: each party adds its own
            "method": method,
            "ids": party_ids(data),  # the aligned IDs (and new people's, for train.py predict)
            "kind": data.task,
            "num_classes": data.num_classes,
            "names": list(names),
            "addresses": book,
        }
        # where Alice's PSI found the IDs in each party's offer
        places = (data.places if isinstance(data, VerticalData) else None) or {}

        def body(m: int, n: str) -> dict:
            return {**setup, "index": m, **({"places": places[n]} if n in places else {})}

        self._setups = {n: body(m, n) for m, n in enumerate(names)}  # kept for a party that rejoins
        try:
            placed = in_parallel(
                [lambda n=n: self._links[n].ask("Setup", self._setups[n]) for n in names], lost_in_place=True
            )
            self._places = dict(zip(names, self.missing.tolerate(placed, self.names[0]), strict=True))
            self.placed = [p for p in self._places.values() if p is not None]
        except BaseException:
            self.close()
            raise

    def deliver(self, requests: list[tuple[str, Message]]) -> list[Message]:
        self._during = during = requests[0][1].during if requests else self._during

        def one(party: str, message: Message) -> Message:
            reply = self._links[party].handle(message, during)
            if reply.sender != party:
                raise VCLInputError(f"party {party} answered with a {reply.kind} that says it is from {reply.sender}.")
            return reply

        return in_parallel([lambda p=p, m=m: one(p, m) for p, m in requests], lost_in_place=True)

    def relay(self, parties: list[str]) -> None:
        for party in parties:
            try:
                records = self._links[party].ask("Relay", None, self._during)
            except PartyLost as err:
                records = self.missing.tolerate([err], self.names[0])[0] or []
            for record in records:
                self.channel.add(MessageRecord(**record))

    def rejoin(self, party: str) -> bool:
        """A party left out is asked Hello (within 5 s at most) on a new link (the old one's reconnection back-off may
        be long after the party went down), then sent the run's Setup again; False if it does not answer or refuses
        (serving another run, say)."""
        self._links[party].close()
        self._links[party] = link = links(self.config, [party])[party]
        try:
            link.ask("Hello", None, self._during, timeout=min(self.config.transport.deadline, 5))
            self._places[party] = link.ask("Setup", self._setups[party], self._during)
        except (PartyLost, VCLInputError):
            return False
        self.placed = [p for p in self._places.values() if p is not None]
        return True

    def close(self) -> None:
        """End the run at every party that answers (another run may then set it up), and close the links."""

        def end(link):
            try:
                link.ask(
                    "End", {"run": self.run["id"]}, "the run's end", timeout=min(self.config.transport.deadline, 5)
                )
            except (PartyLost, VCLInputError):
                pass  # a party that is gone ends its run by itself, transport.deadline after its last request

        if getattr(self, "run", None) and self._links:
            in_parallel([lambda link=link: end(link) for link in self._links.values()])
        for link in self._links.values():
            link.close()
        self._links = {}


def run_name(config) -> dict:
    """What a party is told of the run that sets it up: the coordinator's machine and ``--out`` folder, and a short
    ID of them (a ``--resume`` of the run is the same run; its folder is locked while a coordinator runs it), and
    the deadline after which a party may take another run if this one's coordinator never ends it."""

    name = f"{socket.gethostname()}:{Path(config.run_dir).resolve()}"
    return {"id": hashlib.sha256(name.encode()).hexdigest()[:16], "name": name, "deadline": config.transport.deadline}


def psi_answers(config, names: list[str], drop: list[bool], offer, new: bool = False) -> list[dict]:
    """Star PSI of row IDs, the parties' halves: each party (``names[1:]``; ``drop``: its rows with a missing value
    left out) blinds Alice's ``offer`` again and sends its own IDs blinded once; no ID list crosses."""
    d = config.data

    def body(k: int, offer) -> dict:
        return {"offer": offer, "id_column": d.id_column, "drop": drop[k], "label_column": d.label_column, "new": new}

    these = links(config, names if not new else names[1:])  # Alice's own party only for its read ahead

    def read_ahead() -> None:  # Alice's own party reads her file, kept for its Setup, while the others answer
        try:
            these[names[0]].ask("PSI", body(0, None), "the ID alignment")
        except Exception:  # noqa: BLE001 - its Setup reads the file itself, and says what is wrong with it
            pass

    try:
        answers = in_parallel(  # a party that is down stands as its PartyLost under run.missing_parties: skip
            [lambda k=k: these[names[k]].ask("PSI", body(k, offer), "the ID alignment") for k in range(1, len(names))]
            + ([] if new else [read_ahead]),
            lost_in_place=config.run.missing_parties == "skip",
        )
        return answers[: len(names) - 1]
    finally:
        for link in these.values():
            link.close()
