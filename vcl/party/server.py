"""One organization's party on its own machine, reached over gRPC with mutual TLS (``transport.kind: grpc``).

    python -m vcl.party --config bob.yaml

The config names only what is the party's own (``name``, ``listen``, ``coordinator``, ``tls: {ca, cert, key}``,
``root``, ``csv``, ``predict_csv``, ``secrets``, its limits); the coordinator sends the run's settings as data. It
answers only its coordinator and the federation's other parties, over TLS, one run at a time, and logs each refused
request to standard error. Every setting: docs/deployment.md ("Three organizations, step by step")."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from concurrent import futures
from functools import partial

from vcl.classpath import named_classes
from vcl.errors import VCLInputError, first_line
from vcl.party.checks import setup_method, setup_place
from vcl.party.guard import Guard, Session, raise_open_files_limit
from vcl.party.limits import CapWatch, connection_cap, connection_options, one_line
from vcl.party.settings import PartySettings, load_settings, read_pem

OPS = ("Hello", "Setup", "PSI", "Handle", "Relay", "Forward", "End")
WORKERS = 32  # threads serving calls: calls_per_peer of each organization's leave room for the others'
UNLOCKED = {"Hello", "Relay"}  # Relay holds the party only while it takes its messages, not while it sends them
DATA_OPS = {"Setup", "PSI"}  # the operations that read the party's own files: their sentences back quote nothing


class NotSetUp(RuntimeError):
    """A request for a run this party process does not hold (it restarted since the run set it up)."""


class RunInProgress(RuntimeError):
    """A Setup for another run while the party serves one."""


class PeerLost(RuntimeError):
    """Another party did not take a message this party relayed to it."""

    def __init__(self, peer: str, reason: str, happened: str = "stopped"):
        super().__init__(f"peer {peer} {happened}: {reason}")


class PartyServer(Guard):
    """Answers the coordinator's requests for one party; the party itself is built on ``Setup``."""

    def __init__(self, settings: PartySettings):
        super().__init__(settings)
        self.chunk = int(settings.chunk_mb * 2**20)
        self.runtime = None  # the party runtime (vcl.party.runtime) once a run set it up
        self.session: Session | None = None
        self.names: list[str] = []
        self.addresses: dict[str, str] = {}
        self.lock = threading.Lock()
        self.busy: str | None = None  # the operation that holds the party, if any
        self._peers: dict = {}

    def authorize(self, op: str, context) -> str:
        """The caller, if it may ask ``op`` (before any of its request is read); else the call is refused."""
        import grpc

        who = self.caller(context)
        allowed = set(self.names) - {self.settings.name} if op == "Forward" else {self.settings.coordinator}
        if op == "Hello":
            allowed = {self.settings.coordinator, *self.names}
        if who not in allowed:
            self.refuse(context, grpc.StatusCode.PERMISSION_DENIED, who, op, f"it does not answer {who!r} ({op})")
        return who

    def stream_call(self, op: str, stream, context):
        """One call: authorize, take one of the caller's slots, join the request's pieces (cancelled when one is
        ``stall_s`` late, refused past ``max_message_mb``), decode it, answer in pieces of ``chunk_mb``."""
        from vcl.transports.wire import pieces

        who = self.authorize(op, context)
        with self.slot(who, op, context):
            if who == self.settings.coordinator and self.session is not None:
                self.session.last = time.monotonic()
            frame = self.receive(op, stream, context, who)
            if frame is None:  # cancelled: there is no one to answer
                return
            answer = self.handle_call(op, frame, context, who)
        yield from pieces(answer, self.chunk)

    def handle_call(self, op: str, frame: bytes, context, who: str) -> bytes:
        """The answer to an authorized caller's request, decoded before the party is held; a refused or failed one
        as a gRPC status and a line of the log."""
        import grpc

        from vcl.messages import RuntimeRequest  # torch: this module is imported before a party listens
        from vcl.transports.wire import WireError, pack

        code = grpc.StatusCode
        try:
            request = self.decode(op, frame, who)
            run = getattr(self, "op_" + op.lower())
            if isinstance(request, RuntimeRequest):  # a Save, a Load...: named so in the log and while it runs
                op = request.kind
            if op in UNLOCKED:
                answer = run(request, who)
            else:
                with self.lock:
                    self.busy = op
                    try:
                        answer = run(request, who)
                    finally:
                        self.busy = None
            return answer if isinstance(answer, bytes) else pack("reply", answer)
        except NotSetUp as err:
            self.refuse(context, code.FAILED_PRECONDITION, who, op, str(err))
        except RunInProgress as err:
            self.refuse(context, code.ALREADY_EXISTS, who, op, str(err))
        except PeerLost as err:
            self.refuse(context, code.ABORTED, who, op, str(err))
        except (WireError, VCLInputError, PermissionError) as err:
            if isinstance(err, OSError) and err.errno is not None:  # its own files refused it: its own failure
                self.failed(context, who, op, err)
            kind = code.PERMISSION_DENIED if isinstance(err, PermissionError) else code.INVALID_ARGUMENT
            self.refuse(context, kind, who, op, str(err), quiet=op in DATA_OPS)
        except SystemExit:  # a module a run named exited as it was imported: refused, and the party keeps serving
            self.refuse(context, code.INVALID_ARGUMENT, who, op, f"the {op} request ended in an exit")
        except (KeyError, TypeError, AttributeError) as err:  # a request body without what its operation takes
            why = (first_line(err) or type(err).__name__)[:200]
            self.refuse(context, code.INVALID_ARGUMENT, who, op, f"a malformed {op} ({why})", quiet=op in DATA_OPS)
        except Exception as err:  # the party's own failure: its kind back, its sentence in its log, no traceback
            self.failed(context, who, op, err)

    def failed(self, context, who: str, op: str, err: Exception) -> None:
        """End the call as the party's own failure (INTERNAL: the coordinator keeps its run, to resume once the party
        is mended): the error's kind back, its sentence in the log. A file system that refuses the party's own
        folder (a PermissionError with an errno) is such a failure, not a refusal of the caller."""
        import grpc

        self.note(context, who, op, f"failed: {type(err).__name__}: {err}")
        why = f": {err.strerror[:200]}" if isinstance(err, OSError) and err.strerror else ""  # no path: the log's
        context.abort(grpc.StatusCode.INTERNAL, f"{type(err).__name__}{why} (the party's log says more)")

    def decode(self, op: str, frame: bytes, who: str):
        """A request as its operation takes it: a message to this party (Handle: the coordinator's; Forward: one
        from ``who``) or a mapping of arguments (None for an operation that takes none)."""
        from vcl.transports.wire import WireError, unpack

        if op in ("Handle", "Forward"):  # a party that holds no run has no family loaded to read its messages with
            self._ready()
            return self._message(frame, who if op == "Forward" else None)
        _, body = unpack(frame, self.limit)
        if op in ("Hello", "Relay"):
            return None
        if not isinstance(body, dict):
            raise WireError("the request's body is not a mapping")
        return body

    def _message(self, frame: bytes, sender: str | None):
        """The message a frame holds, addressed to this party; ``sender``: the name it must carry (a party's own;
        the coordinator's messages carry its role in the protocol: alice, master, collaborator)."""
        from vcl.transports.wire import unpack_message

        message = unpack_message(frame, self.limit)
        if message.receiver != self.settings.name:
            raise PermissionError(
                f"a {message.kind} addressed to {message.receiver!r} reached party {self.settings.name}, which takes "
                f"only messages addressed to it; address it to {self.settings.name!r}, or send it to its own party"
            )
        if sender is not None and message.sender != sender:
            raise PermissionError(
                f"a {message.kind} that says it is from {message.sender!r} came from {sender!r}; a party sends "
                "messages in its own name only"
            )
        return message

    def _ready(self):
        if self.runtime is None:
            raise NotSetUp("it holds no run (it restarted, or was never set up)")
        return self.runtime

    # --- the operations ---
    def op_hello(self, body, who: str) -> dict:
        return {"name": self.settings.name, "ready": self.runtime is not None}

    def op_psi(self, body: dict, who: str) -> dict:
        """Star PSI, this party's half on its own file and ID column (:func:`vcl.alignment.psi.answer_from_file`).
        Without an offer (Alice's own party): its file read and kept for its Setup."""
        from vcl.alignment.psi import answer_from_file
        from vcl.datamodules.csv_files import csv_ids

        new = bool(body.get("new"))  # train.py predict: its file of new people
        path = self.settings.predict_csv if new else self.settings.csv
        if not path:
            key = "predict_csv" if new else "csv"
            raise PermissionError(f"this party holds no csv of its own for this (its config's {key}:)")
        id_column, drop, label_column = self.settings.id_column, bool(body["drop"]), body["label_column"]
        if body["offer"] is None:
            import numpy as np

            from vcl.datamodules.reading import note_offer

            listed = len(csv_ids(path, id_column, drop, label_column, not new))
            note_offer(path, id_column, label_column, np.arange(listed))  # Alice's IDs, unshuffled, are her offer
            return {"rows": listed}
        return answer_from_file(path, id_column, drop, label_column, body["offer"], not new)

    def op_setup(self, body: dict, who: str) -> dict:
        run = body.get("run")
        if not (isinstance(run, dict) and all(isinstance(run.get(k), str) for k in ("id", "name"))):
            raise TypeError("the Setup names no run (its id, name and deadline)")
        # checked before the imports below (torch, Lightning: seconds, the first time): a malformed Setup is
        # answered at once
        from vcl.config import SECRETS
        from vcl.party.loading import own_party
        from vcl.party.runtime import PartyRuntime

        deadline = float(run["deadline"])
        index, names = setup_place(body.get("index"), body.get("names"))
        if self.session is not None and self.session.id != run["id"] and self.session.in_progress():
            ago = time.monotonic() - self.session.last
            raise RunInProgress(
                f"it serves run {self.session.name} (last asked {ago:.0f} s ago), so it refuses this Setup for run "
                f"{run['name']}: let that run end, or wait its transport.deadline={self.session.deadline:g} s"
            )
        settings = body["config"]
        outside = sorted(set(named_classes(settings)) - set(self.settings.allow_classes))
        if outside:
            raise PermissionError(
                f"the run names class {outside[0]}, which this party's allow_classes does not list; a party runs "
                "only code its own organization allows"
            )
        method = setup_method(body.get("method"), settings, self.settings.allow_classes)  # after: it may import one
        if names[index] != self.settings.name:
            raise PermissionError(f"party {index} of this run is {names[index]!r}, not {self.settings.name!r}")
        for key in SECRETS:  # its own secrets from its own config; no other's
            group, _, name = key.partition(".")
            settings[group][name] = int(self.settings.secrets.get(key, 0))
        ids = body.get("ids")
        kept = isinstance(ids, dict) and ids.get("checkpoints") is not None  # a finished run's: no training file
        settings["data"] = self.own_data(settings["data"], index, kept)
        if self.settings.csv and "places" in body:  # where Alice found the aligned IDs in its PSI offer: a hint
            from vcl.datamodules.reading import use_places

            use_places(self.settings.csv, body.get("ids"), body["places"])
        if self.settings.device:
            settings["run"]["device"] = self.settings.device
        runtime = PartyRuntime(root=self.settings.root, keep=self.settings.keep_messages)  # its own root and choice
        where = runtime.make_party(own_party, settings, method, index, body.get("ids"), body["kind"],
                              int(body["num_classes"]))  # fmt: skip
        earlier, self.runtime = self.runtime, runtime
        if earlier is not None:  # the run it replaces: its party, logs and writer threads go (one thread a run, kept)
            earlier.close()
        self.names, self.addresses = names, dict(body.get("addresses") or {})
        self.session = Session(run["id"], run["name"], deadline)
        self.close_peers()  # links of an earlier run: a peer may have moved since
        return where

    def own_data(self, data: dict, index: int, kept: bool = False) -> dict:
        """The run's data settings with this party's files, folder, download permission and ID column, from its own
        config: a run may choose among what the party offers, never name another file. ``kept``: a finished run's
        prediction from the party's own checkpoint, which reads its file of new people and not its training file."""
        s = self.settings
        data = {**data, "id_column": s.id_column, "root": s.data_root, "download": s.download}
        for key, own, setting in (("csv_files", s.csv, "csv"), ("predict_files", s.predict_csv, "predict_csv")):
            if key == "csv_files" and (data["dataset"] != "csv" or kept) or not data.get(key):
                continue
            if not own:
                raise PermissionError(f"the run reads this party's {key[:-6]} file, but its config names no {setting}")
            data[key] = [own if k == index else path for k, path in enumerate(data[key])]  # it reads its own only
        return data

    def close_peers(self) -> None:
        for link in self._peers.values():
            link.close()
        self._peers = {}

    def op_end(self, body: dict, who: str) -> None:
        """The coordinator ended run ``body["run"]``: a Setup for another may come (the party keeps what it holds)."""
        if self.session is not None and self.session.id == body["run"]:
            self.session.ended = True

    def op_handle(self, message, who: str) -> bytes | None:
        """The party's reply to a message of the coordinator's, or its runtime's to a request for its files or where it
        runs; its state stays on this machine (a run's checkpoints hold the coordinator's part only)."""
        from vcl.messages import LoadState, StateRequest
        from vcl.transports.wire import pack_message

        if isinstance(message, (StateRequest, LoadState)):
            raise PermissionError(
                "each party keeps its state on its own machine; a run's checkpoints hold the coordinator's part only "
                "(run it through train.py, whose checkpoints do that)"
            )
        reply = self._ready().handle(message)
        return None if reply is None else pack_message(reply)

    def op_forward(self, message, who: str) -> None:
        try:
            self._ready().forward(message)
        except TypeError as err:  # it answered a message that expects no answer
            raise PermissionError(str(err)) from None

    def op_relay(self, body, who: str) -> list:
        """Hand each message this party sent to another party straight to that party (its own TLS connection,
        under the run's deadline); the ledger's lines go back to the coordinator, the messages do not. The party
        is held while its messages are taken, not while they cross: a peer that stalls holds no lock here."""
        from vcl.errors import PartyLost
        from vcl.transports.wire import pack_message

        outgoing = []
        with self.lock:
            try:
                records = self._ready().relay(outgoing.append, self.addresses)
            except ValueError as err:  # a message to no party of the run, or to itself
                raise PermissionError(str(err)) from None
            links = {m.receiver: self.peer(m.receiver) for m in outgoing}
        for message in outgoing:
            try:
                links[message.receiver].call("Forward", pack_message(message))
            except PartyLost as err:
                raise PeerLost(message.receiver, err.reason, err.happened) from None
            except VCLInputError as err:
                raise PermissionError(f"peer {message.receiver} refused a {message.kind}: {first_line(err)}") from None
        return [vars(record).copy() for record in records]

    def peer(self, name: str):
        from vcl.transports.grpc import Link

        if name not in self._peers:
            # within the run's deadline, and before the coordinator's call to this party ends, so that the party
            # that stalled is the one named
            run = self.session.deadline if self.session else 600.0
            self._peers[name] = Link(
                name, self.addresses[name], self.settings.tls, self.limit, deadline=0.8 * run, chunk=self.chunk,
                deadline_is=f"{0.8 * run:g} s, 0.8 × the run's transport.deadline={run:g} s",
            )  # fmt: skip
        return self._peers[name]


def preload() -> None:
    """What every Setup would otherwise make first: torch and Lightning imported and the config's parser built. The
    method families load at the first Setup that names them (loading all four would import scikit-learn)."""
    import vcl.party.loading  # noqa: F401
    from vcl.config import warm_parser

    warm_parser()


def serve(settings: PartySettings, ready=None) -> None:
    """Listen on ``settings.listen`` until SIGTERM or SIGINT; ``ready(port)`` once listening."""
    import grpc

    from vcl.engine.memory import prepare_process

    prepare_process()  # as the command line does (vcl.engine.memory)
    if settings.preload:  # a long-running server: torch, Lightning and the methods before it listens (seconds)
        preload()
    server_state = PartyServer(settings)
    limit = server_state.chunk + 2**16  # one piece of a frame (vcl.transports.wire.pieces)
    raise_open_files_limit()  # before the cap on connections is taken from it
    threading.excepthook = partial(one_line, settings.name)  # a writer thread's failed write: one line of its log

    def handler(op):
        return grpc.stream_stream_rpc_method_handler(
            lambda stream, context: server_state.stream_call(op, stream, context)
        )

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=WORKERS),
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            ("grpc.so_reuseport", 0),  # a second party on this port fails to bind, not shares its connections
            *connection_options(settings),
        ],
        maximum_concurrent_rpcs=4 * WORKERS,  # beyond: refused at once, not queued
    )
    from vcl.transports.wire import SERVICE

    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {op: handler(op) for op in OPS})])
    ca, cert, key = read_pem(settings.tls)
    creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
    try:
        port = server.add_secure_port(settings.listen, creds)
    except RuntimeError:  # grpc's "Failed to bind": in use, or not an address of this machine
        port = 0
    if port == 0:
        raise VCLInputError(
            f"listen={settings.listen!r}: the port cannot be opened (in use, or not an address of this machine); "
            "choose another."
        )
    server.start()
    watch = CapWatch(settings.name, port, connection_cap(settings.max_connections))
    watch.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if ready is not None:
        ready(port)
    stop.wait()
    watch.stop()
    server.stop(grace=2).wait()
    # a Save in progress finishes (its file is whole or absent); any other operation still running (a fit, say) is
    # left: its thread would keep the process until it ended, and its caller was cancelled already
    busy = server_state.busy
    if not server_state.lock.acquire(timeout=60 if busy == "Save" else 0.5):
        sys.stderr.write(f"{settings.name}: stopped with its {busy} unfinished (nothing of it is kept)\n")
        sys.stderr.flush()
        os._exit(0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m vcl.party", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--config", required=True, help="this party's own YAML settings")
    args = p.parse_args(argv)
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # the party says what failed; GRPC_VERBOSITY=debug for gRPC's own
    try:
        settings = load_settings(args.config)
        serve(settings, ready=lambda port: print(f"party {settings.name} listening on port {port}", flush=True))
    except VCLInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
