"""One organization's party on its own machine, reached over gRPC with mutual TLS (``transport.kind: grpc``).

    python -m vcl.party --config bob.yaml

The party's own config names only what is its own; the coordinator sends the run's settings (data, as JSON-like
values in a frame of :mod:`vcl.wire`, never code) when the run starts::

    name: bob                       # the organization: its certificate names it, the coordinator expects it
    listen: 0.0.0.0:50052           # the one port it opens (the coordinator dials in)
    coordinator: alice              # the only organization whose requests it answers (checked on its certificate)
    tls: {ca: keys/ca.pem, cert: keys/bob.pem, key: keys/bob.key}
    root: parties                   # its checkpoints and logs, under <root>/<name>/ on this machine
    csv: /data/bob/customers.csv    # its own rows, for data.dataset: csv (their IDs are intersected privately)
    predict_csv: /data/bob/new.csv  # its own rows of new people, for train.py predict (aligned the same way)
    secrets: {mpdl.secret_b: 0}     # its own secret seeds (0: fresh from the operating system)
    allow_classes: []               # class paths of its own (user models, data modules) a run may name
    max_message_mb: 512             # larger frames (all their pieces) are refused
    chunk_mb: 4                     # frames cross as streams of pieces of at most this many MiB
    device: ""                      # where it trains ("": as the run says)

Every request must come over a TLS connection whose client certificate the federation's CA signed (there is no
plaintext mode): requests to run the protocol from the ``coordinator`` only, party-to-party messages from the
federation's other parties only, each naming its own sender. A frame that is malformed, over the size limit or
from anyone else is refused and the party keeps serving.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

from vcl.classpath import named_classes
from vcl.errors import VCLInputError, first_line

OPS = ("Hello", "Setup", "PSI", "Handle", "Relay", "Forward", "Save", "Load", "Prune", "OpenLogs", "Where")


@dataclass
class PartySettings:
    name: str
    listen: str
    coordinator: str
    tls: dict = field(default_factory=dict)
    root: str = "parties"
    csv: str = ""
    predict_csv: str = ""
    secrets: dict = field(default_factory=dict)
    allow_classes: list = field(default_factory=list)
    max_message_mb: float = 512.0
    chunk_mb: float = 4.0
    device: str = ""


def load_settings(path: str | Path) -> PartySettings:
    """A party's own config, checked: one sentence naming the key and the fix (:class:`VCLInputError`)."""
    import yaml

    from vcl.config import SECRETS
    from vcl.errors import regular_file

    path = Path(path)
    regular_file(path, "the party config", "give --config a YAML file of the party's own settings")
    try:
        raw = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise VCLInputError(f"the party config {path} is not text (UTF-8); give the party's YAML settings.") from None
    except yaml.YAMLError as err:
        reason = str(err).splitlines()[0]
        raise VCLInputError(f"the party config {path} is not YAML ({reason}); fix its syntax.") from None
    if not isinstance(raw, dict):
        raise VCLInputError(f"the party config {path} is not a mapping of settings; write `name: ...` lines.")
    known = set(PartySettings.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise VCLInputError(f"the party config {path}: {unknown[0]!r} is no setting; use {sorted(known)}.")
    for key in ("name", "listen", "coordinator"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise VCLInputError(f"the party config {path} needs {key}: (a string), e.g. name: bob.")
    s = PartySettings(**raw)
    host, sep, port = s.listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise VCLInputError(
            f"the party config {path}: listen={s.listen!r} is not host:port (a port from 0 to 65535); "
            "e.g. 0.0.0.0:50052."
        )
    try:
        socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise VCLInputError(
            f"the party config {path}: listen={s.listen!r} names a host this machine cannot resolve ({reason}); "
            "give one of its own addresses, e.g. 0.0.0.0."
        ) from None
    for key in ("max_message_mb", "chunk_mb"):
        value = getattr(s, key)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 < value <= (1024 if key == "chunk_mb" else 2**40)
        ):
            raise VCLInputError(f"the party config {path}: {key}={value!r} is not a size in MiB; e.g. {key}: 4.")
    for key in ("ca", "cert", "key"):
        if not isinstance(s.tls, dict) or not isinstance(s.tls.get(key), str):
            raise VCLInputError(f"the party config {path} needs tls.{key}: a PEM file (python -m vcl.certs).")
        regular_file(Path(s.tls[key]), f"tls.{key}", "make the federation's files with python -m vcl.certs")
    from vcl.certs import check_pems

    check_pems(s.tls["ca"], s.tls["cert"], s.tls["key"], ("tls.ca", "tls.cert", "tls.key"))
    if not isinstance(s.secrets, dict):
        raise VCLInputError(f"the party config {path}: secrets is not a mapping; e.g. secrets: {{mpdl.secret_b: 0}}.")
    bad = sorted(map(str, set(s.secrets) - set(SECRETS)))
    if bad:
        raise VCLInputError(f"the party config {path}: secrets.{bad[0]} is no secret; use one of {sorted(SECRETS)}.")
    for key, value in s.secrets.items():
        if type(value) is not int or not 0 <= value < 2**63:
            raise VCLInputError(
                f"the party config {path}: secrets.{key}={value!r} is not a whole number from 0 to 2^63 - 1 "
                "(0: fresh from the operating system)."
            )
    if not isinstance(s.allow_classes, list) or not all(isinstance(c, str) for c in s.allow_classes):
        raise VCLInputError(
            f"the party config {path}: allow_classes is not a list of class paths; e.g. allow_classes: [my_pkg.Net]."
        )
    if s.device:  # "": as the run says
        from vcl.build import resolve_device

        resolve_device(s.device, f"the party config {path}: device")
    root = Path(s.root)
    place = next((p for p in (root, *root.parents) if p.exists()), Path("."))
    if not place.is_dir() or not os.access(place, os.W_OK | os.X_OK):
        what = "is not a folder" if not place.is_dir() else "cannot be written"
        raise VCLInputError(
            f"the party config {path}: root={s.root!r}: {place} {what}; give a folder this party may write."
        )
    if s.csv:
        regular_file(Path(s.csv), "the party's csv", "give csv: the path of this organization's own CSV file")
    if s.predict_csv:
        regular_file(Path(s.predict_csv), "the party's predict_csv", "give predict_csv: its own file of new people")
    return s


def read_pem(tls: dict) -> tuple[bytes, bytes, bytes]:
    return tuple(Path(tls[k]).read_bytes() for k in ("ca", "cert", "key"))


class NotSetUp(RuntimeError):
    """A request for a run this party process does not hold (it restarted since the run set it up)."""


class PartyServer:
    """Answers the coordinator's requests for one party; the party itself is built on ``Setup``."""

    def __init__(self, settings: PartySettings):
        self.settings = settings
        self.limit = int(settings.max_message_mb * 2**20)
        self.chunk = int(settings.chunk_mb * 2**20)
        self.runtime = None  # the party runtime (vcl.runtime) once a run set it up
        self.names: list[str] = []
        self.addresses: dict[str, str] = {}
        self.lock = threading.Lock()
        self._peers: dict = {}

    # --- who may ask what ---
    def caller(self, context) -> str:
        """The organization the client certificate names in its one subject alternative name (the CA checked it
        during the handshake): the name the coordinator checks on a party's certificate too, whatever the common
        name says. A certificate with no or several such names is no one."""
        names = context.auth_context().get("x509_subject_alternative_name") or []
        return names[0].decode() if len(names) == 1 else ""

    def authorize(self, op: str, context) -> str:
        """The caller, if it may ask ``op`` (before any of its request is read); else the call is refused."""
        import grpc

        who = self.caller(context)
        allowed = set(self.names) - {self.settings.name} if op == "Forward" else {self.settings.coordinator}
        if op == "Hello":
            allowed = {self.settings.coordinator, *self.names}
        if who not in allowed:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{self.settings.name} does not answer {who!r} ({op})")
        return who

    def stream_call(self, op: str, stream, context):
        """One call: authorize, join the request's pieces (refused once they pass ``max_message_mb``), answer in
        pieces of ``chunk_mb``."""
        import grpc

        from vcl.wire import FrameTooLarge, joined, pieces

        who = self.authorize(op, context)
        try:
            frame = joined(stream, self.limit)
        except FrameTooLarge:
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self.settings.name} accepts frames of at most {self.settings.max_message_mb:g} MiB",
            )
        yield from pieces(self.handle_call(op, frame, context, who), self.chunk)

    def handle_call(self, op: str, frame: bytes, context, who: str) -> bytes:
        """The answer to an authorized caller's request; a refused or failed one as a gRPC status."""
        import grpc

        from vcl.wire import WireError, pack

        try:
            with self.lock:
                answer = getattr(self, "op_" + op.lower())(frame, who)
            return answer if isinstance(answer, bytes) else pack("reply", answer)
        except NotSetUp as err:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{self.settings.name}: {err}")
        except (WireError, VCLInputError, PermissionError) as err:
            code = grpc.StatusCode.PERMISSION_DENIED if isinstance(err, PermissionError) else None
            context.abort(code or grpc.StatusCode.INVALID_ARGUMENT, f"{self.settings.name}: {first_line(err)}")
        except SystemExit:  # a module a run named exited as it was imported: refused, and the party keeps serving
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self.settings.name}: the {op} request ended in an exit")
        except (KeyError, TypeError, AttributeError) as err:  # a request body without what its operation takes
            why = first_line(err) or type(err).__name__
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self.settings.name}: a malformed {op} ({why})")
        except Exception as err:  # the party's own failure: its kind and sentence, no traceback, leave the party
            context.abort(grpc.StatusCode.INTERNAL, f"{type(err).__name__}: {first_line(err)}")

    def _body(self, frame: bytes) -> dict:
        from vcl.wire import WireError, unpack

        _, body = unpack(frame, self.limit)
        if not isinstance(body, dict):
            raise WireError("the request's body is not a mapping")
        return body

    def _message(self, frame: bytes, sender: str | None):
        """The message a frame holds, addressed to this party; ``sender``: the name it must carry (a party's own;
        the coordinator's messages carry its role in the protocol: alice, master, collaborator)."""
        from vcl.wire import unpack_message

        message = unpack_message(frame, self.limit)
        if (sender is not None and message.sender != sender) or message.receiver != self.settings.name:
            raise PermissionError(
                f"a {message.kind} from {message.sender!r} to {message.receiver!r} came from "
                f"{sender or 'the coordinator'!r}"
            )
        return message

    def _ready(self):
        if self.runtime is None:
            raise NotSetUp("it holds no run (it restarted, or was never set up)")
        return self.runtime

    # --- the operations ---
    def op_hello(self, frame: bytes, who: str) -> dict:
        return {"name": self.settings.name, "ready": self.runtime is not None}

    def op_psi(self, frame: bytes, who: str) -> dict:
        """Star PSI, this party's half on its own file (:func:`vcl.psi.answer_from_file`)."""
        from vcl.psi import answer_from_file

        body = self._body(frame)
        new = bool(body.get("new"))  # train.py predict: its file of new people
        path = self.settings.predict_csv if new else self.settings.csv
        if not path:
            key = "predict_csv" if new else "csv"
            raise PermissionError(f"this party holds no csv of its own for this (its config's {key}:)")
        return answer_from_file(path, body["id_column"], bool(body["drop"]), body["label_column"], body["offer"])

    def op_setup(self, frame: bytes, who: str) -> dict:
        from vcl.build import own_party
        from vcl.config import SECRETS
        from vcl.runtime import PartyRuntime

        body = self._body(frame)
        settings = body["config"]
        outside = sorted(set(named_classes(settings)) - set(self.settings.allow_classes))
        if outside:
            raise PermissionError(
                f"the run names class {outside[0]}, which this party's allow_classes does not list; a party runs "
                "only code its own organization allows"
            )
        index, names = int(body["index"]), list(body["names"])
        if names[index] != self.settings.name:
            raise PermissionError(f"party {index} of this run is {names[index]!r}, not {self.settings.name!r}")
        for key in SECRETS:  # its own secrets from its own config; no other's
            group, _, name = key.partition(".")
            settings[group][name] = int(self.settings.secrets.get(key, 0))
        data = settings["data"]
        if data["dataset"] == "csv" and self.settings.csv:
            files = list(data["csv_files"])
            files[index] = self.settings.csv
            data["csv_files"] = files
        if data.get("predict_files") and (self.settings.predict_csv or self.settings.csv):
            if not self.settings.predict_csv:  # its files are its own: never one that Alice names
                raise PermissionError("the run predicts for new people, but this party's config names no predict_csv")
            files = list(data["predict_files"])
            files[index] = self.settings.predict_csv
            data["predict_files"] = files
        if self.settings.device:
            settings["run"]["device"] = self.settings.device
        runtime = PartyRuntime()
        where = runtime.build(own_party, settings, body["method"], index, body.get("ids"), body["kind"],
                              int(body["num_classes"]))  # fmt: skip
        self.runtime, self.names, self.addresses = runtime, names, dict(body.get("addresses") or {})
        self.close_peers()  # links of an earlier run: a peer may have moved since
        return where

    def close_peers(self) -> None:
        for link in self._peers.values():
            link.close()
        self._peers = {}

    def op_where(self, frame: bytes, who: str) -> dict:
        return self._ready().where()

    def op_handle(self, frame: bytes, who: str) -> bytes | None:
        from vcl.wire import pack_message

        message = self._message(frame, None)  # the caller is the coordinator (checked); a bad frame is refused first
        reply = self._ready().handle(message)
        return None if reply is None else pack_message(reply)

    def op_forward(self, frame: bytes, who: str) -> None:
        message = self._message(frame, who)
        try:
            self._ready().forward(message)
        except TypeError as err:  # it answered a message that expects no answer
            raise PermissionError(str(err)) from None

    def op_relay(self, frame: bytes, who: str) -> list:
        """Hand each message this party sent to another party straight to that party (its own TLS connection);
        the ledger's lines go back to the coordinator, the messages do not."""
        from vcl.wire import pack_message

        send = lambda message: self.peer(message.receiver).call("Forward", pack_message(message))  # noqa: E731
        try:
            records = self._ready().relay(send, self.addresses)
        except ValueError as err:  # a message to no party of the run, or to itself
            raise PermissionError(str(err)) from None
        return [vars(record).copy() for record in records]

    def peer(self, name: str):
        from vcl.grpc_transport import Link

        if name not in self._peers:
            self._peers[name] = Link(
                name, self.addresses[name], self.settings.tls, self.limit, deadline=600.0, chunk=self.chunk
            )
        return self._peers[name]

    def _root(self) -> Path:
        return Path(self.settings.root)

    def op_save(self, frame: bytes, who: str) -> None:
        body = self._body(frame)
        self._ready().save(self._root(), _round(body), str(body["run"]))

    def op_load(self, frame: bytes, who: str) -> None:
        body = self._body(frame)
        self._ready().load(self._root(), _round(body), str(body["run"]))

    def op_prune(self, frame: bytes, who: str) -> None:
        self._ready().prune(self._root(), _round(self._body(frame)))

    def op_openlogs(self, frame: bytes, who: str) -> None:
        self._ready().open_logs(self._root())


def _round(body: dict) -> int:
    """The round a Save, Load or Prune names: a whole number (its range is the checkpoints' to check)."""
    from vcl.wire import WireError

    if type(body["round"]) is not int:
        raise WireError("the round is not a whole number")
    return body["round"]


def serve(settings: PartySettings, ready=None) -> None:
    """Listen on ``settings.listen`` until SIGTERM or SIGINT; ``ready(port)`` once listening."""
    import grpc

    server_state = PartyServer(settings)
    limit = server_state.chunk + 2**16  # one piece of a frame (vcl.wire.pieces)

    def handler(op):
        return grpc.stream_stream_rpc_method_handler(
            lambda stream, context: server_state.stream_call(op, stream, context)
        )

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            ("grpc.so_reuseport", 0),  # a second party on this port fails to bind, not shares its connections
        ],
    )
    from vcl.wire import SERVICE

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
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if ready is not None:
        ready(port)
    stop.wait()
    server.stop(grace=2).wait()


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
