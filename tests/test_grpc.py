"""The cross-silo transport (transport.kind: grpc): frames of data (never code), mutual TLS, parties as their own
OS processes on 127.0.0.1 giving the local transport's results and bytes, refused cases refused while the party
keeps serving, a lost party in one sentence and a resume that ends as an uninterrupted run, and rows aligned by
private set intersection."""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from vcl.callbacks import RoundCallback, RoundCheckpoint

from tests.helpers import KillParty, rounds_of
from vcl.coordinator.runner import train
from vcl.errors import PartyLost, VCLInputError
from vcl.family import family_for
from vcl.messages import Labels, Prune, Save, Step
from vcl.methods.messages import FittedValues, PseudoResidual
from vcl.testing.suite import GAL_NAMES, PARTY_NAMES, PARTY_SETTINGS, TransportSuite
from vcl.transports import certs
from vcl.transports.loopback import LoopbackFederation
from vcl.transports.wire import WireError, pack, pack_message, unpack, unpack_message

ROOT = Path(__file__).resolve().parents[1]
family_for("gal")  # the wire table knows the organizations' messages once a family of theirs is loaded, as in a run


# --- frames ---
def test_a_frame_keeps_every_value_and_type():
    value = {
        "f32": torch.randn(3, 2),
        "bf16": torch.randn(4).to(torch.bfloat16),
        "u8": torch.arange(6, dtype=torch.uint8).reshape(2, 3),
        "bool": torch.tensor([True, False]),
        "empty": torch.zeros(0, 5),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "array": np.arange(5, dtype=np.int32),
        "big": 2**521 - 1,
        "nan": float("nan"),
        "inf": -math.inf,
        "tuple": (1, "x", None, True),
        "ints": {0: torch.ones(1), 3: "three", ("a", 1): 2.0},
        "$odd": [1.5, {"nested": [torch.ones(2, dtype=torch.int64)]}],
        "ids": [f"p{i}" for i in range(300)] + ["", "é", "a\nb"],  # many texts: bytes, not header
    }
    frame = pack("Test", value)
    assert len(frame) - len(frame.replace(b"p299", b"")) == 4 and b"p299" not in frame[: 8 + 2000]
    kind, back = unpack(frame)
    assert kind == "Test" and set(back) == set(value)
    for key in ("f32", "bf16", "u8", "bool", "empty", "scalar"):
        assert back[key].dtype == value[key].dtype and torch.equal(back[key], value[key])
    assert back["array"].dtype == np.int32 and (back["array"] == value["array"]).all()
    assert back["big"] == value["big"] and math.isnan(back["nan"]) and back["inf"] == -math.inf
    assert back["tuple"] == value["tuple"] and isinstance(back["tuple"], tuple)
    assert torch.equal(back["ints"][0], torch.ones(1)) and back["ints"][3] == "three" and back["ints"][("a", 1)] == 2.0
    assert torch.equal(back["$odd"][1]["nested"][0], torch.ones(2, dtype=torch.int64))
    assert back["ids"] == value["ids"]


def test_an_arrow_array_of_texts_crosses_as_its_buffers_and_arrives_as_one():
    """The row IDs a run aligned cross as an Arrow array (vcl.transports.wire.party_ids): its bytes and
    lengths, and back an Arrow array again, a slice of one too; missing texts or another type are refused at the
    sender."""
    import pyarrow as pa

    ids = pa.array([f"p{i}" for i in range(1000)] + ["", "é", "a\nb"])
    for value in (ids, ids.slice(7, 300), ids.slice(0, 0), ids.cast(pa.large_string())):
        frame = pack("Test", {"ids": value})
        back = unpack(frame)[1]["ids"]
        assert isinstance(back, pa.Array) and pa.types.is_string(back.type) and back.equals(value.cast(pa.string()))
    assert int.from_bytes(pack("Test", {"ids": ids})[4:8], "little") < 200  # the texts are not in the header
    for refused in (pa.array(["a", None]), pa.array([1, 2])):
        with pytest.raises(TypeError, match="only texts"):
            pack("Test", {"ids": refused})


def test_an_arrow_array_of_texts_with_bad_bytes_or_lengths_is_refused():
    import pyarrow as pa

    frame = pack("Test", {"ids": pa.array(["ab", "cd", "é"])})  # ends with the lengths, three int64
    assert unpack(frame)[1]["ids"].to_pylist() == ["ab", "cd", "é"]
    with pytest.raises(WireError, match="not UTF-8"):
        unpack(frame.replace("é".encode(), b"\xff\xfe"))  # the same length, bytes no text has
    for lengths in ([2, 2, 3], [2, -2, 4], [2**63 - 1, 2**63 - 1, 8]):  # the last adds up to 6 in int64
        with pytest.raises(WireError, match="do not add up"):
            unpack(frame[:-24] + np.asarray(lengths, dtype=np.int64).tobytes())


def test_messages_cross_as_themselves():
    for message in (
        PseudoResidual("alice", "org1", 2, torch.randn(5, 3)),
        Labels("alice", "org1", 0, torch.tensor([0, 2, 1], dtype=torch.uint8), loss="ce"),
        FittedValues("org1", "alice", 3, {1: torch.randn(2, 2), 2: torch.randn(2, 2)}),
        Step("c", "a", 1, "dual", {"epoch": 3, "batch": (4, 5), "rows": np.arange(3)}),
    ):
        back = unpack_message(pack_message(message))
        assert type(back) is type(message) and back.kind == message.kind
        for key, tensor in message.payload().items():
            assert torch.equal(back.payload()[key], tensor)
        assert (back.sender, back.receiver, back.round) == (message.sender, message.receiver, message.round)


def frame_cases() -> dict[str, bytes]:
    good = pack_message(PseudoResidual("alice", "org1", 0, torch.randn(4, 2)))
    header_len = int.from_bytes(good[4:8], "little")
    header = good[8 : 8 + header_len]

    def swap(old, new):
        return (
            good[:4]
            + len(header.replace(old, new)).to_bytes(4, "little")
            + header.replace(old, new)
            + good[8 + header_len :]
        )

    return {
        "magic": b"XXXX" + good[4:],
        "truncated": good[:-3],
        "trailing": good + b"\0",
        "header json": good[:8] + b"[" + good[9:],
        "dtype": swap(b'"float32"', b'"object"'),
        "shape": swap(b"[4,2]", b"[4,3]"),
        "negative shape": swap(b"[4,2]", b"[-4,-2]"),
        "kind": swap(b'"PseudoResidual"', b'"Popen"'),
        "field": swap(b'"values"', b'"command"'),
        "reference": swap(b'{"$t":0}', b'{"$t":7}'),
        "overflowing shape": swap(b"[4,2]", b"[4294967296,4294967296]"),  # its product wrapped to 0 in int64
        "deep": swap(b'"round":0', b'"round":' + b"[" * 100_000 + b"]" * 100_000),  # past the recursion limit
        "long text": swap(b'"float32"', b'"' + b"x" * 2**20 + b'"'),  # a megabyte to echo back
        "texts": swap(b'{"$t":0}', b'{"$s":[0,0]}'),  # texts that name the residual as their bytes and lengths
        "arrow texts": swap(b'{"$t":0}', b'{"$S":[0,0]}'),  # an Arrow array of them likewise
        "header over 8 MiB": swap(b'"round":0', b'"round":"' + b" " * (8 * 2**20) + b'"'),
    }


@pytest.mark.parametrize("case", list(frame_cases()))
def test_a_malformed_frame_is_refused(case):
    with pytest.raises(WireError):
        unpack_message(frame_cases()[case])


def test_a_frame_over_the_limit_is_refused_before_it_is_read():
    frame = pack_message(PseudoResidual("alice", "org1", 0, torch.randn(100, 10)))
    with pytest.raises(WireError, match="over the limit"):
        unpack_message(frame, limit=1000)


def test_a_frame_crosses_in_pieces_and_a_stream_over_the_limit_is_cut_off():
    from vcl.transports.wire import FrameTooLarge, joined, pieces

    frame = pack_message(PseudoResidual("alice", "org1", 0, torch.randn(1000, 7)))
    parts = list(pieces(frame, 4096))
    assert len(parts) == -(-len(frame) // 4096) and max(map(len, parts)) == 4096 and list(pieces(b"", 8)) == [b""]
    back = unpack_message(joined(iter(parts), len(frame)))
    assert torch.equal(back.values, unpack_message(frame).values)
    read = []

    def stream():
        for p in parts:
            read.append(p)
            yield p

    with pytest.raises(FrameTooLarge):
        joined(stream(), 3 * 4096)
    assert len(read) == 4  # the pieces past the limit are never read


def test_code_never_crosses_nor_is_loaded():
    """No module of the cross-silo path imports pickle or its kin, nor calls eval, exec or __import__."""
    banned = {"pickle", "cloudpickle", "dill", "marshal", "shelve", "joblib"}
    paths = [p for side in ("transports", "party", "alignment") for p in sorted((ROOT / "vcl" / side).glob("*.py"))]
    assert {"wire.py", "grpc.py", "server.py", "certs.py", "psi.py"} <= {p.name for p in paths}
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not {a.name.split(".")[0] for a in node.names} & banned, name
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in banned, name
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"eval", "exec", "__import__"}, name


# --- keys ---
def test_certs_are_signed_by_the_ca_and_keys_kept_private(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    certs.make(tmp_path, ["alice", "bob"])
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    bob = x509.load_pem_x509_certificate((tmp_path / "bob.pem").read_bytes())
    ca.public_key().verify(bob.signature, bob.tbs_certificate_bytes, ec.ECDSA(bob.signature_hash_algorithm))
    assert bob.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    ) == ["bob"]
    assert (tmp_path / "bob.key").stat().st_mode & 0o777 == 0o600 and (tmp_path / "ca.key").stat().st_mode & 0o077 == 0
    with pytest.raises(FileExistsError):
        certs.make(tmp_path, ["bob"])  # never overwrites
    assert (
        subprocess.run([sys.executable, "-m", "vcl.transports.certs", "--out", str(tmp_path), "Bad Name"]).returncode
        == 2
    )


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"name": "bob", "listen": "127.0.0.1:0", "coordinator": "alice"}, "needs tls.ca"),
        ({"name": "bob", "listen": "nowhere", "coordinator": "alice"}, "is not host:port"),
        (
            {"name": "bob", "listen": "127.0.0.1:0", "coordinator": "alice", "plaintext": True},
            "'plaintext' is no setting",
        ),
        ({"listen": "127.0.0.1:0", "coordinator": "alice"}, "needs name:"),
        ({"name": "bob", "listen": "127.0.0.1:0", "coordinator": "alice", "chunk_mb": "abc"}, "chunk_mb='abc'"),
        ({"name": "bob", "listen": "127.0.0.1:0", "coordinator": "alice", "max_message_mb": 0}, "not a size in MiB"),
    ],
)
def test_a_bad_party_config_is_one_sentence_and_exit_2(tmp_path, settings, words):
    import yaml

    path = tmp_path / "bob.yaml"
    path.write_text(yaml.safe_dump(settings))
    proc = subprocess.run([sys.executable, "-m", "vcl.party", "--config", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_every_bad_party_setting_is_one_sentence_before_the_party_listens(tmp_path):
    """Swapped, garbage or mismatched PEM files, the CA's key as the CA, binary YAML, an unresolvable or impossible
    listen address, bad secrets, a device the machine lacks, a root that is a file: each was a traceback, a bind
    error or a party that started and failed later."""
    import yaml

    from vcl.party.settings import load_settings

    certs.make(tmp_path / "keys", ["alice", "bob"])
    certs.make(tmp_path / "other", ["bob"])
    k = tmp_path / "keys"
    certs.make(tmp_path / "expired", ["bob"], days=0)  # valid until the moment it was made
    for suffix in ("pem", "key"):  # signed by another CA too: the expiry is what the case names, checked first
        (k / f"old.{suffix}").write_bytes((tmp_path / "expired" / f"bob.{suffix}").read_bytes())
    (tmp_path / "garbage.pem").write_text("hello\n")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "bob").symlink_to(tmp_path / "real")  # the party's own folder under a real root
    tls = {"ca": str(k / "ca.pem"), "cert": str(k / "bob.pem"), "key": str(k / "bob.key")}
    good = {"name": "bob", "listen": "127.0.0.1:0", "coordinator": "alice", "tls": tls, "root": str(tmp_path / "r")}
    cases = [
        ({"tls": {**tls, "cert": tls["key"], "key": tls["cert"]}}, "tls.cert=.* holds a private key, not a certif"),
        ({"tls": {**tls, "ca": str(tmp_path / "garbage.pem")}}, "tls.ca=.* holds no PEM certificate"),
        ({"tls": {**tls, "ca": str(k / "ca.key")}}, "tls.ca=.* holds a private key"),
        ({"tls": {**tls, "key": str(k / "alice.key")}}, "tls.key=.* is not the key of the certificate tls.cert"),
        ({"tls": {**tls, "ca": str(tmp_path / "other" / "ca.pem")}}, "tls.cert=.* was not signed by the CA of tls.ca"),
        ({"listen": "nosuchhost.invalid:5000"}, "names a host this machine cannot resolve"),
        ({"listen": "127.0.0.1:99999"}, r"is not host:port \(a port from 0 to 65535\)"),
        ({"secrets": {"mpdl.secret_b": "abc"}}, "secrets.mpdl.secret_b='abc' is not a whole number"),
        ({"secrets": [1, 2]}, "secrets is not a mapping"),
        ({"device": "tpu9"}, "device='tpu9' is not a device"),
        ({"root": str(tmp_path / "afile")}, "afile is not a folder"),
        ({"root": str(tmp_path / "linked")}, "linked is a symbolic link, and vcl never writes through one"),
        ({"root": str(tmp_path / "real")}, "real/bob is a symbolic link, and vcl never writes through one"),
        ({"allow_classes": "my_pkg.Net"}, "allow_classes is not a list of class paths"),
        ({"calls_per_peer": 0}, "calls_per_peer=0 is not a whole number from 1 to 64"),
        ({"stall_s": "abc"}, "stall_s='abc' is not a number of seconds"),
        ({"handshake_s": True}, "handshake_s=True is not a number of seconds"),
        ({"idle_s": -1}, "idle_s=-1 is not a number of seconds"),
        ({"connection_age_s": 0.5}, "connection_age_s=0.5 is not a number of seconds from 1 to"),
        ({"max_connections": 2.5}, "max_connections=2.5 is not a whole number from 0 to 65536"),
        ({"max_connections": -1}, "max_connections=-1 is not a whole number"),
        ({"id_column": ""}, "id_column is not a non-empty string"),
        ({"download": "yes"}, "download='yes' is not true or false"),
        ({"preload": 1}, "preload=1 is not true or false"),
        ({"name": "alice"}, "tls.cert=.* names bob, not 'alice'; give this organization's own certificate"),
        ({"tls": {**tls, "cert": str(k / "old.pem"), "key": str(k / "old.key")}}, r"tls.cert=.*old.pem expired"),
        ({"name": "../bob"}, "name='../bob' is not an organization's name"),
    ]
    if not torch.cuda.is_available():
        cases.append(({"device": "cuda"}, "device='cuda' but no such CUDA device is visible"))
    for i, (change, words) in enumerate(cases):
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(yaml.safe_dump({**good, **change}))
        with pytest.raises(VCLInputError, match=words):
            load_settings(path)
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(good))
    assert load_settings(tmp_path / "good.yaml").name == "bob"
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x00\xff\xfe binary")
    proc = subprocess.run([sys.executable, "-m", "vcl.party", "--config", str(binary)], capture_output=True, text=True)
    assert (
        proc.returncode == 2
        and proc.stderr == f"error: the party config {binary} is not text (UTF-8); give the party's YAML settings.\n"
    )


@pytest.mark.slow
def test_a_second_party_on_a_partys_port_is_refused_in_one_sentence(federation, tmp_path):
    """Two parties could bind one port (SO_REUSEPORT) and split its connections between them."""
    import yaml

    tls = federation.tls("org1")
    port = federation.ports["org1"]
    path = tmp_path / "twin.yaml"
    settings = {"name": "org1", "listen": f"127.0.0.1:{port}", "coordinator": "alice", "tls": tls}
    path.write_text(yaml.safe_dump({**settings, "root": str(tmp_path / "root")}))
    proc = subprocess.run(
        [sys.executable, "-m", "vcl.party", "--config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "the port cannot be opened (in use" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert still_serving(federation)


def test_a_run_that_names_no_address_for_a_party_stops_before_any_work(tiny, tmp_path):
    certs.make(tmp_path, ["alice"])
    tls = {
        f"transport.tls_{k}": str(tmp_path / f)
        for k, f in (("ca", "ca.pem"), ("cert", "alice.pem"), ("key", "alice.key"))
    }
    config = tiny(
        **{"transport.kind": "grpc", "transport.addresses": {"alice": "127.0.0.1:1"}, "data.organizations": 2}, **tls
    )
    with pytest.raises(VCLInputError, match="gives no host:port for party org1"):
        train(config, verbose=False, write=False)


# --- parties as their own processes ---
@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    with LoopbackFederation(tmp_path_factory.mktemp("federation"), PARTY_NAMES, own=PARTY_SETTINGS) as fed:
        yield fed


@pytest.mark.slow
class TestGrpc(TransportSuite):
    """The transport suite (:mod:`vcl.testing.suite`) with every party its own process, every frame crossing in pieces
    of 1 KiB."""

    apart = True

    @pytest.fixture
    def transport(self, federation):
        return lambda names: {**federation.overrides(names), "transport.chunk_mb": 0.001}


@pytest.mark.slow
def test_a_lost_party_is_one_sentence_and_resume_after_it_is_back_equals_uninterrupted(federation, tiny, tmp_path):
    base = {"data.organizations": 3, "run.rounds": 3, "learner.epochs": 5}
    whole = train(tiny(out=str(tmp_path / "whole"), **{"run.concurrent": False}, **base), verbose=False)
    config = tiny(out=str(tmp_path / "cut"), **federation.overrides(GAL_NAMES), **base)
    port = federation.ports["org2"]
    with pytest.raises(
        PartyLost, match=rf"^party org2 did not answer during round 2: nothing answers at 127.0.0.1:{port} \(it is"
    ) as lost:
        train(config, verbose=False, callbacks=[RoundCheckpoint(), KillParty(1, federation, "org2")])
    assert lost.value.saved_round == 1
    with pytest.raises(PartyLost, match="party org2 did not answer during start-up: nothing answers"):
        train(config, resume=True, verbose=False)  # still down: the same sentence, nothing changed
    federation.restart("org2")  # its own machine kept its checkpoints
    resumed = train(config, resume=True, verbose=False)
    assert rounds_of(resumed) == rounds_of(whole) and resumed["value"] == whole["value"]
    assert [p.name for p in own_folder(federation, "org2", tmp_path / "cut").glob("round-*")] == ["round-3.ckpt"]
    # what crossed is kept by the party that chose to in its own config (org1), not by one that did not (org2),
    # whatever the coordinator's run.keep_messages says
    assert sorted(p.name for p in (own_folder(federation, "org1", tmp_path / "cut") / "messages").iterdir())
    assert not (own_folder(federation, "org2", tmp_path / "cut") / "messages").exists()


def own_folder(federation, party: str, out: Path) -> Path:
    """Where a party on its own machine keeps the checkpoints of the run in ``out``: ``<root>/<party>/<run id>/``."""
    from vcl.storage.checkpoints import load_checkpoint

    run_id = load_checkpoint(out / "checkpoints" / "last.ckpt")["run_id"]
    return federation.folder / f"{party}-machine" / party / run_id


# --- refused cases ---
def hello_from(federation, party: str, client: str, ca_dir: Path | None = None, name: str | None = None):
    from vcl.transports.grpc import Link

    tls = federation.tls(client)
    if ca_dir is not None:
        tls = {
            "ca": str(ca_dir / "ca.pem"),
            "cert": str(ca_dir / f"{client}.pem"),
            "key": str(ca_dir / f"{client}.key"),
        }
    link = Link(name or party, f"127.0.0.1:{federation.ports[party]}", tls, 2**20, deadline=10.0, retries=0)
    try:
        return link.ask("Hello")
    finally:
        link.close()


def still_serving(federation, party="org1") -> bool:
    return hello_from(federation, party, federation.coordinator)["name"] == party


@pytest.mark.slow
def test_refused_cases_are_refused_and_the_party_keeps_serving(federation, tmp_path):
    import grpc

    from vcl.transports.grpc import Link

    assert still_serving(federation)
    certs.make(tmp_path / "other", ["alice"])  # another CA's certificate with the coordinator's name
    with pytest.raises(VCLInputError, match="TLS handshake failed"):
        hello_from(federation, "org1", "alice", ca_dir=tmp_path / "other")
    assert still_serving(federation)
    with pytest.raises(VCLInputError, match="certificate names 'org2'"):
        hello_from(federation, "org1", "alice", name="org2")  # org1's address, org2 expected: its name is checked
    with pytest.raises(VCLInputError, match="refused the Setup request"):
        Link("org1", f"127.0.0.1:{federation.ports['org1']}", federation.tls("intruder"), 2**20, 10.0, 0).ask(
            "Setup", {}
        )
    channel = grpc.insecure_channel(f"127.0.0.1:{federation.ports['org1']}")  # plaintext
    with pytest.raises(grpc.RpcError):
        channel.unary_unary("/vcl.Party/Hello")(b"", timeout=5)
    channel.close()
    link = Link("org1", f"127.0.0.1:{federation.ports['org1']}", federation.tls("alice"), 2**30, 10.0, 0)
    with pytest.raises(VCLInputError, match="over the size limit"):
        link.call("Handle", b"\0" * (20 * 2**20))  # the test parties' limit is 16 MiB
    for frame in frame_cases().values():
        with pytest.raises(VCLInputError, match="refused the Handle request"):
            link.call("Handle", frame)
    with pytest.raises(VCLInputError, match="a malformed Setup"):
        link.ask("Setup", {"index": 0})  # a well-formed frame whose body lacks what the operation takes
    link.close()
    assert still_serving(federation)


@pytest.mark.slow
def test_a_party_takes_its_caller_from_the_name_the_coordinator_checks_too(federation, tmp_path):
    """The party trusted the certificate's common name, the coordinator its alternative name: a CA-signed
    certificate with CN=alice and SAN=intruder was taken for the coordinator. Both now read the one SAN."""
    from vcl.testing.probes import signed

    for i, alternative in enumerate((["intruder"], ["alice", "intruder"], [])):
        signed(federation, "alice", alternative, tmp_path / str(i))
        with pytest.raises(VCLInputError, match="does not answer"):
            hello_from(federation, "org1", "alice", ca_dir=tmp_path / str(i))
    assert still_serving(federation)


@pytest.mark.slow
def test_a_kind_parties_never_send_each_other_is_refused_before_it_reaches_the_party(federation, tiny, tmp_path):
    """Another party of the run injects a residual into org1 (a Forward): refused before org1's state changes."""
    from vcl.methods.messages import PredictionRequest, PseudoResidual
    from vcl.transports.grpc import Link
    from vcl.transports.wire import pack_message, unpack_message

    base = {"data.organizations": 3, "run.rounds": 1, "learner.epochs": 2}
    train(tiny(**federation.overrides(GAL_NAMES), **base, out=str(tmp_path / "run")), verbose=False)
    address = f"127.0.0.1:{federation.ports['org1']}"
    alice, org2 = (Link("org1", address, federation.tls(n), 2**24, 10.0, 0) for n in ("alice", "org2"))

    def predictions():
        frame = alice.call("Handle", pack_message(PredictionRequest("alice", "org1", 1, "train")))
        return unpack_message(frame, 2**24).values

    before = predictions()
    rows, classes = before["1"].shape
    for kind in (PseudoResidual("org2", "org1", 1, torch.ones(rows, classes)), PredictionRequest("org2", "org1", 1)):
        with pytest.raises(VCLInputError, match="refused the Forward request: org1: org1 takes no message from an"):
            org2.call("Forward", pack_message(kind))
    after = predictions()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    alice.close(), org2.close()
    assert still_serving(federation)


@pytest.mark.slow
def test_a_save_or_prune_of_a_round_the_party_does_not_hold_changes_nothing(federation, tiny, tmp_path):
    """A coordinator's Prune of round 10^9 deleted every checkpoint, a Save of round -1 was written: a party now
    prunes only behind a checkpoint it holds and saves only rounds 0 to 10^9; its files are its owner's only."""
    import stat

    from vcl.transports.grpc import Link

    base = {"data.organizations": 3, "run.rounds": 2, "learner.epochs": 2}
    train(tiny(**federation.overrides(GAL_NAMES), **base, out=str(tmp_path / "run")), verbose=False)
    folder = own_folder(federation, "org1", tmp_path / "run")
    kept = {p.name: p.read_bytes() for p in folder.glob("round-*.ckpt")}
    assert "round-2.ckpt" in kept
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.glob("round-*.ckpt"))
    link = Link("org1", f"127.0.0.1:{federation.ports['org1']}", federation.tls("alice"), 2**20, 10.0, 0)
    link.handle(Prune("alice", "org1", 10**9))
    for bad in (-1, 10**9 + 1, "2", 2.5, True):
        with pytest.raises(VCLInputError, match="refused the Save request"):
            link.handle(Save("alice", "org1", bad, run="x"))
        with pytest.raises(VCLInputError, match="refused the Prune request"):
            link.handle(Prune("alice", "org1", bad))
    link.close()
    assert {p.name: p.read_bytes() for p in folder.glob("round-*.ckpt")} == kept
    assert still_serving(federation)


@pytest.mark.slow
def test_a_party_that_moved_is_reached_where_the_next_run_says(federation, tiny, tmp_path):
    """ASCII's agents send each other their scores party to party. A party kept its links to the others across
    runs: after one restarted on another port every later run failed. Each Setup now starts its links afresh."""
    base = {"method": "ascii", "learner.model": ["tree"], "data.organizations": 3, "run.rounds": 1}
    first = train(tiny(**federation.overrides(GAL_NAMES), **base, out=str(tmp_path / "a")), verbose=False)
    federation.kill("org2")
    old = federation.ports.pop("org2")
    federation.restart("org2")  # on a port the system picks
    assert federation.ports["org2"] != old
    second = train(tiny(**federation.overrides(GAL_NAMES), **base, out=str(tmp_path / "b")), verbose=False)
    assert rounds_of(second) == rounds_of(first)


def test_every_spelling_of_a_class_counts_against_allow_classes():
    from vcl.classpath import named_classes

    config = {
        "method": "my_pkg.Boost",
        "data": {"module": "sklearn:evil_pkg.DataModule{}"},  # a kind that is not what the class is
        "learner": {"callbacks": [{"class_path": "pkg.Callback"}], "model": ["sklearn:sklearn.svm.SVC{}"]},
        "dc": {"central": "sklearn:sklearn.linear_model.LogisticRegression"},
    }
    assert sorted(named_classes(config)) == ["evil_pkg.DataModule", "my_pkg.Boost", "pkg.Callback"]


@pytest.mark.slow
def test_a_class_spelled_as_scikit_learns_is_refused_unless_its_party_allows_it(federation):
    from vcl.transports.grpc import Link

    link = Link("org1", f"127.0.0.1:{federation.ports['org1']}", federation.tls("alice"), 2**20, 10.0, 0)
    run = {"id": "r", "name": "a run", "deadline": 10.0}
    setup = {"config": {"data": {"module": "sklearn:os.Thing"}}, "index": 1, "names": GAL_NAMES, "run": run}
    with pytest.raises(VCLInputError, match="names class os.Thing, which this party's allow_classes does not list"):
        link.ask("Setup", setup)
    link.close()
    assert still_serving(federation)


# --- rows aligned by private set intersection ---
def write_party_files(folder: Path, n=60, seed=0):
    rng = np.random.RandomState(seed)
    ids = [f"p{i:03d}" for i in rng.permutation(n + 20)]
    x = rng.randn(n + 20, 5)
    label = (x[:, 0] + x[:, 2] + x[:, 4] > 0).astype(int)
    files = []
    for k, (name, cols, extra) in enumerate((("alice", [0, 1], ["label"]), ("bob", [2, 3], []), ("carol", [4], []))):
        rows = [i for i in range(n + 20) if i < n or (i - n) % 3 == k]  # each also holds some people only it has
        lines = [",".join(["id"] + [f"{name}{c}" for c in cols] + extra)]
        for i in rows:
            lines.append(",".join([ids[i]] + [f"{x[i, c]:.6f}" for c in cols] + ([str(label[i])] if extra else [])))
        path = folder / f"{name}.csv"
        path.write_text("\n".join(lines) + "\n")
        files.append(path)
    return files, [ids[i] for i in range(n)]


@pytest.mark.slow
def test_csv_rows_aligned_by_psi_over_grpc_equal_the_plain_intersection(tiny, tmp_path):
    files, shared = write_party_files(tmp_path)
    base = {"data.dataset": "csv", "data.task": "classification", "run.rounds": 2, "learner.epochs": 5}
    local = train(
        tiny(**base, **{"data.csv_files": [str(f) for f in files], "run.concurrent": False}), verbose=False, write=False
    )
    own = {n: {"csv": str(f)} for n, f in zip(("alice", "bob", "carol"), files, strict=True)}
    opened, watching = [], []

    def audit(event, args):
        if watching and event == "open" and isinstance(args[0], (str, os.PathLike)) and str(args[0]).endswith(".csv"):
            opened.append(Path(args[0]).name)

    sys.addaudithook(audit)  # audit hooks cannot be removed: this one records .csv names only while watching
    with LoopbackFederation(tmp_path / "fed", ["alice", "bob", "carol"], own=own, preload=True) as fed:  # as deployed
        config = tiny(**base, **fed.overrides(), **{"data.csv_files": [str(files[0]), "bob", "carol"]})
        watching.append(True)
        try:
            remote = train(config, verbose=False, write=False)
        finally:
            watching.clear()
    assert rounds_of(remote) == rounds_of(local) and remote["value"] == local["value"]
    assert remote["organizations"] == ["alice", "bob", "carol"]
    assert set(opened) == {"alice.csv"}  # the coordinator opened Alice's file and no other


def test_psi_answers_reveal_no_id_to_a_curious_alice(tmp_path):
    """Alice holds the party's answer and every candidate ID (the party's whole list among them): hashing each
    to the curve, as the party did before blinding, finds none of them in what the party sent."""
    from vcl.alignment.psi import PSISide, answer_from_file, decode, hash_to_curve

    files, shared = write_party_files(tmp_path)
    alice_ids = [line.split(",")[0] for line in files[0].read_text().splitlines()[1:]]
    bob_ids = [line.split(",")[0] for line in files[1].read_text().splitlines()[1:]]
    alice = PSISide("alice", alice_ids)
    answer = answer_from_file(str(files[1]), "id", False, "label", alice.offer())
    alice.answer(answer["offer"])
    found = sorted(alice_ids[r] for r in alice.match(answer["twice"]))
    assert found == sorted(set(alice_ids) & set(bob_ids)) and len(found) == len(shared)
    sent = set(decode(answer["offer"])) | set(decode(answer["twice"]))
    candidates = set(hash_to_curve(sorted(set(bob_ids) | set(alice_ids))))
    assert not sent & candidates and len(decode(answer["offer"])) == len(bob_ids)


@pytest.mark.slow
def test_the_cli_names_a_party_that_is_down_at_start_and_leaves_nothing(tmp_path):
    with LoopbackFederation(tmp_path / "fed", ["alice", "org1"]) as fed:
        fed.kill("org1")
        o = fed.overrides()
        args = [
            sys.executable, str(ROOT / "train.py"), "--quiet", "--data.organizations", "2", "--run.rounds", "1",
            "--out", str(tmp_path / "run"), "--transport.kind", "grpc", "--transport.retries", "1",
            "--transport.addresses", str(o["transport.addresses"]).replace("'", '"'),
            "--transport.tls_ca", o["transport.tls_ca"], "--transport.tls_cert", o["transport.tls_cert"],
            "--transport.tls_key", o["transport.tls_key"],
        ]  # fmt: skip
        proc = subprocess.run(args, capture_output=True, text=True)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        f"error: party org1 did not answer during start-up: nothing answers at 127.0.0.1:{fed.ports['org1']}"
    )
    assert "nothing was saved yet" in lines[0]
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


class AfterRound(RoundCallback):
    def __init__(self, at, act):
        self.at, self.act = at, act

    def on_round_end(self, run, record):
        if record["round"] == self.at:
            self.act()


@pytest.mark.slow
def test_a_party_that_restarts_or_stalls_mid_run_is_one_sentence(tiny, tmp_path):
    import signal

    base = {"data.organizations": 2, "run.rounds": 2, "learner.epochs": 5}
    whole = train(tiny(out=str(tmp_path / "whole"), **{"run.concurrent": False}, **base), verbose=False)
    with LoopbackFederation(tmp_path / "fed", ["alice", "org1"]) as fed:
        config = tiny(out=str(tmp_path / "cut"), **fed.overrides(), **base)
        restart = AfterRound(0, lambda: (fed.kill("org1"), fed.restart("org1")))
        with pytest.raises(PartyLost, match=r"^party org1 stopped during round 1: it restarted and holds no run"):
            train(config, verbose=False, callbacks=[RoundCheckpoint(), restart])
        resumed = train(config, resume=True, verbose=False)
        assert rounds_of(resumed) == rounds_of(whole)
        stalled = tiny(out=str(tmp_path / "stall"), **{**fed.overrides(), "transport.deadline": 3.0}, **base)
        stop = AfterRound(0, lambda: fed.procs["org1"].send_signal(signal.SIGSTOP))
        try:
            with pytest.raises(PartyLost, match=r"^party org1 did not answer during round 1: no answer came within "):
                train(stalled, verbose=False, callbacks=[RoundCheckpoint(), stop])
        finally:
            fed.procs["org1"].send_signal(signal.SIGCONT)


def test_every_message_class_crosses_once_its_family_is_loaded():
    """The wire's table is vcl.messages' classes and what each loaded family registers; every message class in
    vcl's source is in it once the built-in families are loaded (each family's grpc test shows it registers its own)."""
    import importlib
    import pkgutil

    import vcl
    from vcl.family import load_family
    from vcl.messages import Message
    from vcl.registry import FAMILIES
    from vcl.transports.wire import message_classes

    for info in pkgutil.walk_packages(vcl.__path__, "vcl."):
        if info.name.startswith("vcl.methods") or info.name == "vcl.engine.split_network":
            importlib.import_module(info.name)
    for path in FAMILIES.values():
        load_family(path)
    found, todo = set(), [Message]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo.extend(cls.__subclasses__())
    ours = {c for c in found if c.__module__.startswith("vcl.")}
    assert ours <= set(message_classes().values()), sorted(c.__name__ for c in ours - set(message_classes().values()))
