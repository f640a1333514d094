"""Hostile calls against a gRPC party process, as an attacker or a mistaken operator makes them (what
``tests/test_party_safety.py`` asserts on and ``benchmarks/transport.py`` records): each targets ``org1`` of a
:class:`vcl.transports.loopback.LoopbackFederation` after :func:`set_up`, giving ``{"refused": bool, "detail": str}``;
``org1`` should take frames over 64 MiB (``max_message_mb: 128``) and a short ``stall_s``."""

from __future__ import annotations

import datetime
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from vcl.config import RunConfig, party_copy
from vcl.coordinator.assembly import build_protocol
from vcl.coordinator.runner import run_data, train
from vcl.errors import PartyLost, VCLInputError
from vcl.messages import Save
from vcl.methods.messages import PseudoResidual
from vcl.transports import certs
from vcl.transports.grpc import Link
from vcl.transports.wire import SERVICE, pack_message

NAMES = ["alice", "org1", "org2"]
PROBED = {"max_message_mb": 128, "stall_s": 2, "handshake_s": 1, "idle_s": 3}  # org1's settings for the probes


def config(fed, out: str, **extra):
    """A small GAL run of ``fed``'s three parties."""

    values = {"data.dataset": "wine", "data.organizations": 3, "run.rounds": 1, "learner.epochs": 2, "compare": [],
              "out": out, "run.device": "cpu", **fed.overrides(NAMES), **extra}  # fmt: skip
    return RunConfig.from_dict(values)


def set_up(fed, folder: Path) -> None:
    train(config(fed, str(folder / "set-up")), verbose=False, write=False)


def link(fed, who: str = "alice", deadline: float = 10.0, name: str = "org1", tls: dict | None = None):
    return Link(name, f"127.0.0.1:{fed.ports['org1']}", tls or fed.tls(who), 2**30, deadline, retries=0)


def attempt(call) -> dict:
    """Whether ``call`` was refused (one sentence, or an RPC error), and the sentence."""
    import grpc

    try:
        call()
        return {"refused": False, "detail": ""}
    except (VCLInputError, PartyLost, grpc.RpcError) as err:
        return {"refused": True, "detail": str(err.details() if isinstance(err, grpc.RpcError) else err)[:300]}


def hello(fed, **kw) -> dict:
    one = link(fed, **kw)
    try:
        return one.ask("Hello")
    finally:
        one.close()


def peak_mb(pid: int) -> float:
    """A process's peak resident memory so far (Linux's VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- the probes ---
def wrong_ca(fed, folder: Path) -> dict:
    other = folder / "other-ca"
    certs.make(other, ["alice"])
    tls = {k: str(other / f) for k, f in (("ca", "ca.pem"), ("cert", "alice.pem"), ("key", "alice.key"))}
    return attempt(lambda: hello(fed, tls=tls))


def cn_san_mismatch(fed, folder: Path) -> dict:
    """A certificate the federation's CA signed with CN=alice (the coordinator) and SAN=intruder."""
    tls = signed(fed, "alice", ["intruder"], folder / "cn-san")
    return attempt(lambda: hello(fed, tls=tls))


def wrong_name(fed, folder: Path) -> dict:
    return attempt(lambda: hello(fed, name="org2"))


def plaintext(fed, folder: Path) -> dict:
    import grpc

    def call():
        channel = grpc.insecure_channel(f"127.0.0.1:{fed.ports['org1']}")
        try:
            channel.unary_unary("/vcl.Party/Hello")(b"", timeout=5)
        finally:
            channel.close()

    return attempt(call)


def oversize(fed, folder: Path) -> dict:
    return attempt(lambda: link(fed, deadline=60.0).call("Handle", b"\0" * (129 * 2**20)))


def malformed(fed, folder: Path) -> dict:
    import torch

    good = pack_message(PseudoResidual("alice", "org1", 0, torch.zeros(4, 2)))
    return attempt(lambda: link(fed).call("Handle", good[:-5]))


def header_64mib(fed, folder: Path) -> dict:
    """A frame whose JSON header is 64 MiB of empty lists: decoded, some 3 GB."""

    header = json.dumps({"v": 1, "kind": "x", "body": [[]] * (16 * 2**20), "tensors": []}).encode()
    frame = b"VCLW" + struct.pack("<I", len(header)) + header
    return attempt(lambda: link(fed, deadline=60.0).call("Handle", frame))


def stalled_calls(fed, folder: Path) -> dict:
    """org2 (a peer org1 answers) opens more calls than org1 serves at once from one organization and a stranger
    opens 30, none sending a byte: org1 refuses org2's extra calls at once, the stranger's all, answers its
    coordinator meanwhile, and cancels org2's stalled calls after ``stall_s``."""
    import grpc

    hold, calls, channels = threading.Event(), [], []

    def nothing():
        hold.wait()
        yield b""

    for who in ["org2"] * 6 + ["intruder"] * 30:
        tls = fed.tls(who)
        creds = grpc.ssl_channel_credentials(*(Path(tls[k]).read_bytes() for k in ("ca", "key", "cert")))
        address = f"127.0.0.1:{fed.ports['org1']}"
        channels.append(grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", "org1")]))
        calls.append(channels[-1].stream_stream(f"/{SERVICE}/Forward")(nothing(), timeout=60))
    try:
        time.sleep(0.5)
        start = time.perf_counter()
        answered = hello(fed)["name"] == "org1"
        seconds = time.perf_counter() - start
        codes = []
        for call in calls:
            try:
                next(call)
                codes.append("OK")
            except (grpc.RpcError, StopIteration) as err:
                codes.append(err.code().name if isinstance(err, grpc.RpcError) else "OK")
    finally:
        hold.set()
        for channel in channels:
            channel.close()
    counts = {c: codes.count(c) for c in sorted(set(codes))}
    refused = answered and seconds < 1.0 and "OK" not in codes
    return {"refused": refused, "detail": f"coordinator answered in {seconds:.3f} s; the 36 calls ended {counts}"}


def idle_strangers(fed, folder: Path) -> dict:
    """A stranger the federation's CA signed opens 40 connections, each with one refused call, and leaves them open:
    org1 closes each once it has had no call for ``idle_s``."""
    import grpc

    tls = fed.tls("intruder")
    creds = grpc.ssl_channel_credentials(*(Path(tls[k]).read_bytes() for k in ("ca", "key", "cert")))
    options = [("grpc.ssl_target_name_override", "org1"), ("grpc.use_local_subchannel_pool", 1)]  # one each
    pid = fed.procs["org1"].pid
    before = len(os.listdir(f"/proc/{pid}/fd"))
    channels, codes = [], []
    try:
        for _ in range(40):
            channels.append(grpc.secure_channel(f"127.0.0.1:{fed.ports['org1']}", creds, options=options))
            try:
                next(channels[-1].stream_stream(f"/{SERVICE}/Hello")(iter([b""]), timeout=10))
                codes.append("OK")
            except grpc.RpcError as err:
                codes.append(err.code().name)
        held = len(os.listdir(f"/proc/{pid}/fd")) - before
        until = time.monotonic() + 2 * fed_setting(fed, "idle_s", 3600.0) + 10  # gRPC's idle timer is coarse
        while (left := len(os.listdir(f"/proc/{pid}/fd")) - before) > 5 and time.monotonic() < until:
            time.sleep(0.5)
    finally:
        for channel in channels:
            channel.close()
    refused = set(codes) == {"PERMISSION_DENIED"} and held >= 30 and left <= 5
    return {"refused": refused, "detail": f"{codes.count('PERMISSION_DENIED')} of 40 calls refused; {held} "
            f"connections open after them, {left} after idle_s"}  # fmt: skip


def injected_forward(fed, folder: Path) -> dict:
    import torch

    frame = pack_message(PseudoResidual("org2", "org1", 1, torch.ones(4, 3)))
    return attempt(lambda: link(fed, who="org2").call("Forward", frame))


def foreign_save(fed, folder: Path) -> dict:
    """A Save for a run the party does not serve, after the run it serves saved: refused, and nothing written for
    it (a party wrote a checkpoint for whatever run a Save named, into the folder every run shared)."""
    org1 = link(fed)
    try:
        attempt(lambda: org1.handle(Save("alice", "org1", 7, run="probeserved/x"), "round 7"))
        record = attempt(lambda: org1.handle(Save("alice", "org1", 7, run="probeother/x"), "round 7"))
    finally:
        org1.close()
    written = fed.folder / "org1-machine" / "org1" / "probeother"
    return {**record, "refused": record["refused"] and not written.exists()}


def second_setup(fed, folder: Path) -> dict:
    """A second coordinator's run while another is set up: refused with both runs named; the first ends as usual."""

    first = config(fed, str(folder / "first"))
    protocol = build_protocol(first, run_data(first))
    try:
        second = config(fed, str(folder / "second"))
        return attempt(lambda: build_protocol(second, run_data(second)).federation.close())
    finally:
        protocol.federation.close()


def sklearn_spelling(fed, folder: Path) -> dict:
    run = {"id": "probe", "name": "a probe", "deadline": 10.0}
    setup = {"config": {"data": {"module": "sklearn:os.Thing"}}, "index": 1, "names": NAMES, "run": run}
    return attempt(lambda: link(fed).ask("Setup", setup))


def file_outside_config(fed, folder: Path) -> dict:
    """A CSV run's Setup naming a file of org1's machine that org1's config does not name (it names no csv)."""

    settings = party_copy(config(fed, str(folder / "csv")).to_dict(), None)
    settings["data"].update(dataset="csv", csv_files=["/etc/hostname", "/etc/passwd", "/etc/hosts"])
    body = {"run": {"id": "probe", "name": "a probe", "deadline": 10.0}, "config": settings, "method": "gal",
            "index": 1, "names": NAMES, "kind": "classification", "num_classes": 3}  # fmt: skip
    return attempt(lambda: link(fed).ask("Setup", body))


def second_bind(fed, folder: Path) -> dict:
    """Another party process on org1's port."""
    import yaml

    settings = yaml.safe_load(fed.config_file("org1").read_text())
    path = folder / "second-bind.yaml"
    path.write_text(yaml.safe_dump({**settings, "listen": f"127.0.0.1:{fed.ports['org1']}"}))
    done = subprocess.run([sys.executable, "-m", "vcl.party", "--config", str(path)], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    return {"refused": done.returncode == 2, "detail": done.stderr.strip()[-300:]}


def raw_connections(fed, folder: Path) -> dict:
    """200 TCP connections that never start TLS: each closed by the party after its ``handshake_s``."""
    socks = [socket.create_connection(("127.0.0.1", fed.ports["org1"])) for _ in range(200)]
    try:
        time.sleep(fed_setting(fed, "handshake_s", 10.0) + 1.5)
        closed = 0
        for s in socks:
            s.settimeout(0.5)
            try:
                closed += s.recv(1) == b""
            except (TimeoutError, OSError):
                pass
    finally:
        for s in socks:
            s.close()
    return {"refused": closed == len(socks), "detail": f"{closed} of {len(socks)} closed by the party"}


class Flood:
    """A client with no certificate holding a party's places: ``sockets`` TCP connections to ``port`` that never start
    TLS, each reopened once closed, from ``source``, at most ``rate`` new a second, for at most ``seconds`` and ``most``
    in all; it counts ``opened``, ``closed`` (by the far end), ``failed`` (refused) and ``held`` (the most at once)."""

    def __init__(self, port: int, sockets: int = 100, source: str = "127.0.0.2", seconds: float = 120.0,
                 most: int = 50_000, rate: float = 700.0, host: str = "127.0.0.1"):  # fmt: skip
        self.where, self.source, self.sockets = (host, port), (source, 0), sockets
        self.seconds, self.most, self.rate = seconds, most, rate
        self.opened = self.closed = self.failed = self.held = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        socks: list[socket.socket] = []
        end, gap = time.monotonic() + self.seconds, 1.0 / self.rate
        try:
            while not self._stop.is_set() and time.monotonic() < end and self.opened + self.failed < self.most:
                if len(socks) < self.sockets:
                    try:
                        socks.append(socket.create_connection(self.where, timeout=1.0, source_address=self.source))
                        self.opened += 1
                    except OSError:
                        self.failed += 1
                    self.held = max(self.held, len(socks))
                    time.sleep(gap)
                    continue
                for s in select.select(socks, [], [], 0.05)[0]:  # readable: closed by the far end (it sends nothing)
                    try:
                        gone = s.recv(1) == b""
                    except OSError:
                        gone = True
                    if gone:
                        s.close()
                        socks.remove(s)
                        self.closed += 1
        finally:
            for s in socks:
                s.close()


def flood(fed, folder: Path) -> dict:
    """A client with no certificate holds 100 plain sockets at org1 from another address and opens each again as soon
    as it is closed (:class:`Flood`): Alice's Hello, asked meanwhile, is answered."""
    with Flood(fed.ports["org1"], 100, seconds=30) as wave:
        time.sleep(1.0)
        start = time.perf_counter()
        answered = not attempt(lambda: hello(fed, deadline=5.0))["refused"]
        took = time.perf_counter() - start
    detail = (f"{wave.opened} opened, {wave.closed} closed by the party, {wave.held} held at once; Alice's Hello "
              f"{'answered' if answered else 'not answered'} in {took:.1f} s")  # fmt: skip
    return {"refused": answered and wave.held == 100, "detail": detail}


def fed_setting(fed, key: str, default):
    return fed.own.get("org1", {}).get(key, default)


PROBES = {
    "wrong_ca": wrong_ca,
    "cn_san_mismatch": cn_san_mismatch,
    "wrong_name": wrong_name,
    "plaintext": plaintext,
    "oversize": oversize,
    "malformed": malformed,
    "header_64mib": header_64mib,
    "stalled_calls": stalled_calls,
    "idle_strangers": idle_strangers,
    "injected_forward": injected_forward,
    "second_setup": second_setup,
    "sklearn_spelling": sklearn_spelling,
    "file_outside_config": file_outside_config,
    "foreign_save": foreign_save,
    "second_bind": second_bind,
    "raw_connections": raw_connections,
    "flood": flood,
}


def probe_all(fed, names=None) -> list[dict]:
    """Each probe's record: refused, whether org1 still answers its coordinator, its peak memory before and
    after (MB)."""
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        set_up(fed, Path(tmp))
        for name in names or PROBES:
            before = peak_mb(fed.procs["org1"].pid)
            record = {"benchmark": "transport_security", "case": name, **PROBES[name](fed, Path(tmp))}
            serving = attempt(lambda: hello(fed))
            record.update(still_serving=not serving["refused"], peak_mb_before=round(before, 1),
                          peak_mb_after=round(peak_mb(fed.procs["org1"].pid), 1))  # fmt: skip
            records.append(record)
    return records


def signed(fed, common: str, alternative: list[str], folder: Path) -> dict:
    """TLS files for a key and a certificate the federation's CA signs, with the given common name and DNS
    alternative names (none: a certificate without the extension)."""

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca = x509.load_pem_x509_certificate((fed.keys / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((fed.keys / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if alternative:  # a certificate without names has no SubjectAlternativeName (cryptography 51 refuses an empty one)
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in alternative]), critical=False
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ca.pem").write_bytes((fed.keys / "ca.pem").read_bytes())
    (folder / f"{common}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{common}.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return {"ca": str(folder / "ca.pem"), "cert": str(folder / f"{common}.pem"), "key": str(folder / f"{common}.key")}
