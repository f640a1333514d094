"""A party that runs for weeks (issue 81, the fourth pass of safe runs): it serves run after run with flat threads
and files, holds no more connections than it can, and says who is at fault: the Setup's index or method, a message's
receiver, a party that holds no run, did not answer, or whose folder was removed. Unit tests on the server's handlers
(a party process needs seconds a run), and one process test of its connection limits."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
import torch

from tests.helpers import Aborted, Context
from vcl.config import RunConfig, party_copy
from vcl.coordinator.runner import run_data
from vcl.errors import PartyLost, VCLInputError
from vcl.messages import OpenLogs, Save, Where
from vcl.methods.messages import PseudoResidual
from vcl.party.limits import MOST_CONNECTIONS, connection_cap, connection_options, held_by_source, one_line
from vcl.party.server import PartyServer
from vcl.party.settings import PartySettings
from vcl.transports.grpc import Link
from vcl.transports.wire import pack, pack_message, party_ids

NAMES = ["alice", "org1", "org2"]


@pytest.fixture(scope="module")
def wine(tmp_path_factory):
    """A small GAL run's config and data, as the coordinator holds them."""
    out = tmp_path_factory.mktemp("wine")
    config = RunConfig.from_dict({"data.dataset": "wine", "data.organizations": 3, "run.rounds": 1,
                                  "learner.epochs": 2, "compare": [], "out": str(out / "run"),
                                  "run.device": "cpu"})  # fmt: skip
    return config, run_data(config)


def setup_body(wine, run: str, **changed) -> dict:
    """The Setup the coordinator sends org1 for run ``run`` (:class:`vcl.transports.grpc.GrpcTransport`'s)."""
    config, data = wine
    body = {"run": {"id": run, "name": f"the run {run}", "deadline": 10.0},
            "config": party_copy(config.to_dict(), None), "method": "gal", "ids": party_ids(data), "kind": data.task,
            "num_classes": data.num_classes, "names": list(NAMES), "addresses": {}, "index": 1}  # fmt: skip
    return {**body, **changed}


def party(tmp_path) -> PartyServer:
    return PartyServer(PartySettings(name="org1", listen="127.0.0.1:0", coordinator="alice", root=str(tmp_path)))


def a_round(server: PartyServer, run: str, round_: int = 1) -> None:
    """What a round asks of org1: its fit, then its checkpoint and the round's line in its TensorBoard log."""
    runtime = server.runtime
    rows = len(runtime.party.view.splits["train"])
    runtime.handle(PseudoResidual("alice", "org1", round_, torch.zeros(rows, 3)))
    runtime.handle(Save("alice", "org1", round_, run=f"{run}/digest"))


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


# --- a party that outlives its runs -------------------------------------------------------------------------
def test_a_party_serves_twenty_runs_in_turn_with_flat_threads_and_files(wine, tmp_path, monkeypatch):
    """Each Setup made a new runtime and left the last run's TensorBoard writer open: one thread more a run (9 -> 22
    after 12 runs of a party process). The run a Setup replaces is now closed: its party, its logs, its writer."""
    monkeypatch.setattr("vcl.methods.organization.after_last_event_file", lambda folder: None)  # a second a run
    server = party(tmp_path)
    counts = []
    for k in range(20):
        run = f"run{k}"
        server.handle_call("Setup", pack("Setup", setup_body(wine, run)), Context(), "alice")
        server.runtime.handle(OpenLogs("alice", "org1", 0, root=""))
        a_round(server, run)
        server.op_end({"run": run}, "alice")
        counts.append((threading.active_count(), open_files()))
    assert counts[-1] == counts[1], counts  # the first run opens what every run shares (torch's pools)
    assert len(list((tmp_path / "org1").iterdir())) == 21  # each run's checkpoints, and the one log folder


# --- sentences that name the input at fault -----------------------------------------------------------------
@pytest.mark.parametrize(
    "index,said",
    [
        (-2, "the index in the Setup is -2, not a whole number from 0 to 2"),  # names[-2] is org1: counted from the end
        (True, "the index in the Setup is a bool (True), not a whole number"),
        ("1", "the index in the Setup is a str (1), not a whole number"),
        (1.9, "the index in the Setup is a float (1.9), not a whole number"),
        (3, "the index in the Setup is 3, not a whole number from 0 to 2; send the place of this party among the 3"),
    ],
)
def test_a_setups_index_is_a_whole_number_in_range_or_refused_as_the_coordinators_input(wine, tmp_path, index, said):
    """-1, True, "1" and 1.9 were taken as indices (int()), and one past the names was the party's own IndexError
    (INTERNAL, "the party's log says more")."""
    server = party(tmp_path)
    with pytest.raises(Aborted) as refused:
        server.handle_call("Setup", pack("Setup", setup_body(wine, "r", index=index)), Context(), "alice")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT and said in str(refused.value), refused.value
    assert server.runtime is None


@pytest.mark.parametrize(
    "method,code,said",
    [
        ("nope", "INVALID_ARGUMENT", "the method in the Setup, nope, is no method this party runs; name one of gal, "),
        (7, "INVALID_ARGUMENT", "the method in the Setup, a int, is no method this party runs"),
        ("os.Thing", "PERMISSION_DENIED", "the run names class os.Thing, which this party's allow_classes does not"),
    ],
)
def test_a_setups_method_the_party_does_not_run_is_named_as_the_method(wine, tmp_path, method, code, said):
    """method: "nope" was refused with a sentence that blamed compare ("compare lists 'nope'"); a class path as
    the Setup's method was imported whatever the party's allow_classes said."""
    server = party(tmp_path)
    with pytest.raises(Aborted) as refused:
        server.handle_call("Setup", pack("Setup", setup_body(wine, "r", method=method)), Context(), "alice")
    assert refused.value.code.name == code and said in str(refused.value) and "compare" not in str(refused.value)


def test_a_message_for_another_receiver_or_in_another_name_is_named_for_what_is_wrong(wine, tmp_path):
    """ "a PseudoResidual from 'alice' to '\\ud800' came from 'the coordinator'" never said that the receiver was not
    this party."""
    server = party(tmp_path)
    server.handle_call("Setup", pack("Setup", setup_body(wine, "r")), Context(), "alice")
    other = pack_message(PseudoResidual("alice", "\ud800", 1, torch.zeros(4, 3)))
    with pytest.raises(Aborted) as refused:
        server.handle_call("Handle", other, Context(), "alice")
    said = str(refused.value)
    assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED, said
    assert (
        "a PseudoResidual addressed to '\\ud800' reached party org1, which takes only messages addressed to it" in said
    )
    assert "address it to 'org1'" in said and "came from" not in said
    posing = pack_message(PseudoResidual("alice", "org1", 1, torch.zeros(4, 3)))
    server.names = NAMES
    with pytest.raises(Aborted) as refused:
        server.handle_call("Forward", posing, Context(), "org2")
    assert "a PseudoResidual that says it is from 'alice' came from 'org2'; a party sends messages in its own" in str(
        refused.value
    )


def link_error(code, details: str, during: str = "start-up"):
    org1 = SimpleNamespace(name="org1", address="127.0.0.1:1", deadline_is="transport.deadline=20 s")
    return Link.error(org1, "Where", code, details, during)


def test_a_party_that_holds_no_run_at_start_up_is_said_to_serve_not_to_have_stopped():
    """After refused Setups a Where said the party "stopped during start-up" while it served."""
    said = str(link_error(grpc.StatusCode.FAILED_PRECONDITION, "org1: it holds no run"))
    assert said.startswith("party org1 holds no run during start-up: its Setup was refused or did not reach it")
    assert "stopped" not in said and "it still serves: set it up again" in said


def test_a_party_that_is_busy_or_out_of_reach_did_not_answer_it_did_not_stop():
    """A party whose connections a stranger held was said to have "stopped during start-up: it did not answer within
    transport.deadline=20 s", though it never stopped."""
    late = link_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    assert isinstance(late, PartyLost) and str(late).startswith(
        "party org1 did not answer during start-up: no answer came within transport.deadline=20 s (it is busy, or "
        "holds every connection it takes: its max_connections)"
    )
    away = link_error(grpc.StatusCode.UNAVAILABLE, "failed to connect", "round 2")
    assert str(away).startswith("party org1 did not answer during round 2: nothing answers at 127.0.0.1:1 (")


def test_a_refusal_that_ends_in_a_period_is_not_given_a_second():
    """The resume refusal of a party whose folder was removed ended in "--overwrite.."."""
    details = "org1: --resume: party org1 has no checkpoint of round 1 at x; start the run afresh with --overwrite."
    said = str(link_error(grpc.StatusCode.INVALID_ARGUMENT, details))
    assert said.endswith("with --overwrite.") and ".." not in said


def test_a_party_whose_folder_was_removed_mid_run_says_so_in_one_line(wine, tmp_path, monkeypatch, capsys):
    """A party whose root was deleted mid-run failed its Save for a file that was TensorBoard's, with 15 lines of
    TensorBoard's writer thread in its log. Its Save now fails naming its folder, in one line of its log, and its next
    run (the folder back) logs afresh."""
    monkeypatch.setattr("vcl.methods.organization.after_last_event_file", lambda folder: None)
    monkeypatch.setattr(threading, "excepthook", lambda args: one_line("org1", args))  # as serve() sets it
    root = tmp_path / "root"
    server = party(root)
    server.handle_call("Setup", pack("Setup", setup_body(wine, "r")), Context(), "alice")
    server.runtime.handle(OpenLogs("alice", "org1", 0, root=""))
    a_round(server, "r", 1)
    shutil.rmtree(root)
    capsys.readouterr()
    rows = len(server.runtime.party.view.splits["train"])
    server.runtime.handle(PseudoResidual("alice", "org1", 2, torch.zeros(rows, 3)))
    with pytest.raises(Aborted) as failed:
        server.handle_call("Handle", pack_message(Save("alice", "org1", 2, run="r/digest")), Context(), "alice")
    time.sleep(0.2)  # a writer thread's line, if any, comes now
    log = capsys.readouterr().err.strip().splitlines()
    assert failed.value.code == grpc.StatusCode.INTERNAL
    assert str(failed.value) == (
        "FileNotFoundError: the party's folder was removed while it served this run (its earlier checkpoints and logs "
        "with it); put it back and --resume, or start the run afresh (the party's log says more)"
    )
    assert len(log) == 1 and f"{root / 'org1'}" in log[0] and "tensorboard" not in log[0], log
    server.op_end({"run": "r"}, "alice")  # its coordinator ends the run that failed
    server.handle_call("Setup", pack("Setup", setup_body(wine, "again")), Context(), "alice")  # the folder back
    server.runtime.handle(OpenLogs("alice", "org1", 0, root=""))
    a_round(server, "again")
    assert list((root / "org1" / "tensorboard").glob("events.out.tfevents.*"))


def test_a_writer_threads_failure_is_one_line_of_the_partys_log(capsys):
    def write():
        raise FileNotFoundError(2, "No such file or directory", "/gone/events.out.tfevents.1")

    hook = threading.excepthook
    threading.excepthook = lambda args: one_line("org1", args)
    try:
        thread = threading.Thread(target=write, name="tensorboard-writer")
        thread.start()
        thread.join()
    finally:
        threading.excepthook = hook
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "org1: tensorboard-writer failed: FileNotFoundError: " in err, err


# --- connections anyone can open ----------------------------------------------------------------------------
def test_the_partys_connection_limits_are_grpcs_own_and_fit_its_open_files(monkeypatch):
    """The limits that bound how long a connection holds one of the party's places, with the default settings: a
    wave of connections keeps a federation member out for at most :func:`kept_out_s` (66 s): plain TCP 5 s, a stranger
    the CA signed 2 x 30 s idle (gRPC's idle timer is coarse) or 60 s x 1.1 of age (gRPC's jitter) if it keeps
    calling."""
    import resource

    settings = PartySettings(name="org1", listen="127.0.0.1:0", coordinator="alice")
    options = dict(connection_options(settings))
    assert options["grpc.server_handshake_timeout_ms"] == 5000 and options["grpc.max_connection_idle_ms"] == 30000
    assert options["grpc.max_connection_age_ms"] == 60000 and options["grpc.keepalive_time_ms"] == 60000
    assert options["grpc.keepalive_timeout_ms"] == 20000
    assert "grpc.max_concurrent_streams" not in options  # calls_per_peer is the guard's (a refused stream: a lost call)
    assert kept_out_s(settings) <= 66.0
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (128, 128))
    assert connection_cap(0) == 64 and connection_cap(500) == 64  # 128 files: 64 kept for its own
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (96, 96))
    assert connection_cap(64) == 32
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (20000, 20000))  # the cap is sized to the files, not 64
    assert connection_cap(0) == 19936 and connection_cap(200) == 200
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (resource.RLIM_INFINITY,) * 2)
    assert connection_cap(0) == MOST_CONNECTIONS


def test_the_party_counts_the_connections_it_holds_by_source_address():
    """What the party's log names when its cap sheds a wave: the connections held, by where they come from."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    socks = [socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
             for source in ["127.0.0.2"] * 3 + ["127.0.0.1"]]  # fmt: skip
    try:
        assert held_by_source(port) == {"127.0.0.2": 3, "127.0.0.1": 1}
    finally:
        for s in [*socks, listener]:
            s.close()


def kept_out_s(settings: PartySettings) -> float:
    """How long one wave of connections can hold every place a party has: the longest a connection lives without TLS,
    without a call (gRPC checks idleness at a coarse interval: up to twice idle_s), and in all (age, +10%)."""
    return max(settings.handshake_s, 2 * settings.idle_s, 1.1 * settings.connection_age_s)


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.slow
def test_neither_plain_sockets_nor_a_ca_signed_stranger_keep_the_coordinator_out_past_the_bound(tmp_path):
    """Under 128 open files, 200 TCP connections without TLS held every one of the party's files until its
    handshake timeout, and a stranger's 125 refused-but-open connections kept Alice's Hello out for ~3.5 min (idle:
    120 s, checked coarsely). Now the party holds at most 64 connections (the rest are closed as they come), so it
    never runs out of files, and each wave ends within :func:`kept_out_s` of the party's settings."""
    from vcl.testing.probes import hello
    from vcl.transports.loopback import LoopbackFederation
    from vcl.transports.wire import SERVICE

    own = {"org1": {"handshake_s": 1, "idle_s": 2, "connection_age_s": 3}}
    settings = PartySettings(name="org1", listen="", coordinator="alice", **own["org1"])
    with LoopbackFederation(tmp_path, ["org1"], own=own, open_files=128) as fed:
        pid, port = fed.procs["org1"].pid, fed.ports["org1"]
        assert hello(fed)["name"] == "org1"
        base = fd_count(pid)

        def held_and_waited() -> tuple[int, float]:
            """The descriptors a wave holds beyond the party's own, and how long Alice's Hello then waits."""
            held, start = fd_count(pid) - base, time.perf_counter()
            return held, until_answered(fed, kept_out_s(settings) + 10) - start

        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
        try:
            time.sleep(0.5)
            held, waited = held_and_waited()
        finally:
            for s in socks:
                s.close()
        assert held <= 64 + 2 and waited < settings.handshake_s + 4, (held, waited)
        time.sleep(1.5)  # the watch counts each second: the wave's start and end are one line each in the log
        log = "".join(fed.log["org1"])
        assert "org1: at its connection cap (" in log and "of 64 held): new connections are closed" in log, log
        assert "held by 127.0.0.1 ×" in log and "org1: below its connection cap again after " in log, log

        tls = fed.tls("intruder")
        creds = grpc.ssl_channel_credentials(*(Path(tls[k]).read_bytes() for k in ("ca", "key", "cert")))
        options = [("grpc.ssl_target_name_override", "org1"), ("grpc.use_local_subchannel_pool", 1)]
        channels, codes = [], []
        try:
            for _ in range(125):
                channels.append(grpc.secure_channel(f"127.0.0.1:{port}", creds, options=options))
                try:
                    next(channels[-1].stream_stream(f"/{SERVICE}/Hello")(iter([b""]), timeout=5))
                except grpc.RpcError as err:
                    codes.append(err.code().name)
            held, waited = held_and_waited()
        finally:
            for channel in channels:
                channel.close()
    assert set(codes) <= {"PERMISSION_DENIED", "UNAVAILABLE"} and codes.count("PERMISSION_DENIED") >= 60, codes
    assert held <= 64 + 2, held  # before: 125, the party at its limit of open files
    assert waited < kept_out_s(settings) + 3, waited


def until_answered(fed, within: float) -> float:
    """When the party first answers its coordinator's Hello (asked again and again), or ``within`` seconds on."""
    from vcl.testing.probes import attempt, hello

    end = time.perf_counter() + within
    while time.perf_counter() < end:
        if not attempt(lambda: hello(fed, deadline=2.0))["refused"]:
            return time.perf_counter()
        time.sleep(0.1)
    return end


def test_a_where_after_refused_setups_is_answered_by_the_runtime_once_one_is_accepted(wine, tmp_path):
    """A Setup refused (a wrong index) leaves the party as it was: a Where names no run; the next good Setup serves."""
    server = party(tmp_path)
    with pytest.raises(Aborted):
        server.handle_call("Setup", pack("Setup", setup_body(wine, "r", index=9)), Context(), "alice")
    with pytest.raises(Aborted) as none:
        server.handle_call("Handle", pack_message(Where("alice", "org1", 0)), Context(), "alice")
    assert none.value.code == grpc.StatusCode.FAILED_PRECONDITION
    server.handle_call("Setup", pack("Setup", setup_body(wine, "r")), Context(), "alice")
    assert server.op_hello(None, "alice")["ready"]


def test_a_setup_refusal_is_a_vcl_input_error_the_coordinator_reads_as_refused():
    from vcl.party.checks import setup_method, setup_place

    with pytest.raises(VCLInputError, match="the names in the Setup are not a list"):
        setup_place(0, "alice")
    assert setup_place(2, NAMES) == (2, NAMES) and setup_method("alone", {"method": "gal"}, []) == "alone"


# --- a flood of connections without a certificate -----------------------------------------------------------------
def small_gal(out: Path, **transport) -> RunConfig:
    values = {"data.dataset": "wine", "data.organizations": 3, "run.rounds": 2, "learner.epochs": 2, "compare": [],
              "out": str(out), "run.device": "cpu", "run.audit": False, **transport}  # fmt: skip
    return RunConfig.from_dict(values)


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> dict:
    """The small GAL run in one process: the figures a flood must leave a run over gRPC."""
    from vcl.coordinator.runner import train

    return train(small_gal(tmp_path_factory.mktemp("alone")), verbose=False, write=False)


def same_figures(a: dict, b: dict) -> bool:
    from vcl.testing.suite import rounds_of

    return rounds_of(a) == rounds_of(b) and a["value"] == b["value"]


@pytest.mark.slow
def test_a_flood_without_a_certificate_leaves_a_run_started_during_it_its_figures(tmp_path, alone):
    """A client with no certificate holding 100 plain sockets at each party and opening each again as soon as it is
    closed made a GAL run started meanwhile fail in 15 s: the cap was 64 at any open-files limit. Now the cap is the
    limit less what the party keeps for itself, and the run ends with the figures it has alone."""
    from vcl.coordinator.runner import train
    from vcl.testing.probes import Flood
    from vcl.transports.loopback import LoopbackFederation

    with LoopbackFederation(tmp_path / "fed", NAMES) as fed:
        floods = [Flood(fed.ports[n], 100, seconds=90) for n in ("org1", "org2")]
        with floods[0], floods[1]:
            time.sleep(1.0)
            flooded = train(small_gal(tmp_path / "flooded", **fed.overrides(NAMES)), verbose=False, write=False)
        log = "".join(fed.log["org1"] + fed.log["org2"])
    assert same_figures(flooded, alone)
    assert all(f.held == 100 for f in floods), [(f.held, f.opened, f.closed) for f in floods]
    assert "connection cap" not in log, log  # 100 sockets are far from a cap sized to the open-files limit


HAPROXY = shutil.which("haproxy")


def haproxy_recipe(public: int, party: int) -> str:
    """deployment.md's HAProxy block, on these ports (its ``bind`` and its ``server``'s address)."""
    import re

    page = (Path(__file__).parents[1] / "docs" / "deployment.md").read_text()
    [block] = re.findall(r"```haproxy\n(.*?)```", page, re.S)
    block = re.sub(r"bind \S+", f"bind 127.0.0.1:{public}", block)
    return re.sub(r"(server \w+) \S+", rf"\1 127.0.0.1:{party}", block)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(HAPROXY is None, reason="HAProxy is not installed: apt-get install -y haproxy")
def test_deployments_haproxy_recipe_keeps_a_flood_from_one_address_off_the_partys_places(tmp_path, alone):
    """gRPC sheds a stranger's connections and Alice's alike at the cap: a per-source limit in front of the port (the
    recipe of docs/deployment.md) keeps a flood from 127.0.0.2 to 8 places of a party that has 24, and a run from
    Alice's 127.0.0.1 started during it ends with its figures. The same flood straight at the party takes every place,
    and its log says so."""
    import subprocess

    from vcl.coordinator.runner import train
    from vcl.testing.probes import Flood
    from vcl.transports.loopback import LoopbackFederation

    with LoopbackFederation(tmp_path / "fed", NAMES, own={"org1": {"max_connections": 24}}) as fed:
        with Flood(fed.ports["org1"], 100, seconds=30):  # straight at the party: its cap sheds the wave
            time.sleep(2.5)
        time.sleep(1.5)
        straight = "".join(fed.log["org1"])
        assert "org1: at its connection cap (" in straight and "of 24 held)" in straight, straight
        assert "held by 127.0.0.2 ×" in straight and "org1: below its connection cap again" in straight, straight
        public = free_port()
        config = tmp_path / "party.cfg"
        config.write_text(haproxy_recipe(public, fed.ports["org1"]))
        proxy = subprocess.Popen([HAPROXY, "-f", str(config), "-db"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            until = time.monotonic() + 10
            while proxy.poll() is None and time.monotonic() < until:
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", public)) == 0:
                        break
                time.sleep(0.1)
            assert proxy.poll() is None, proxy.stdout.read().decode()
            overrides = fed.overrides(NAMES)
            overrides["transport.addresses"]["org1"] = f"127.0.0.1:{public}"
            with Flood(public, 100, seconds=90) as flood:
                time.sleep(1.0)
                behind = train(small_gal(tmp_path / "behind", **overrides), verbose=False, write=False)
        finally:
            proxy.terminate()
            proxy.wait(10)
        log = "".join(fed.log["org1"])
    assert same_figures(behind, alone)
    assert flood.failed + flood.closed > 100, (flood.opened, flood.closed, flood.failed)  # the proxy refused them
    assert log.count("at its connection cap (") == 1, log  # behind the proxy the party never reached its cap
