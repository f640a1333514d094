"""A party that faces the network keeps serving, obeys only its own config and says what happened: each hostile
call of :mod:`vcl.testing.probes` against party processes on 127.0.0.1, and the cases that need a run in progress, a
party with few files to open, or a party that cannot write."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from vcl.callbacks import RoundCallback

from tests.helpers import Aborted, Context, rounds_of
from vcl.coordinator.runner import train
from vcl.errors import PartyFailed, PartyLost, VCLInputError
from vcl.messages import Save, Where
from vcl.testing.probes import NAMES, PROBED, PROBES, attempt, config, hello, link, peak_mb, set_up
from vcl.transports.loopback import LoopbackFederation

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probed")
    with LoopbackFederation(folder, NAMES, own={"org1": PROBED}) as federation:
        set_up(federation, folder)
        yield federation


SAYS = {
    "wrong_ca": "the TLS handshake failed",
    "cn_san_mismatch": "org1: it does not answer 'intruder' .Hello.",
    "wrong_name": "check that its certificate names 'org2'",
    "plaintext": "",
    "oversize": "org1: it accepts frames of at most 128 MiB",
    "malformed": "refused the Handle request: org1: the tensors' bytes run past the frame's end",
    "header_64mib": "refused the Handle request: org1: a header of 67108910 bytes is over the limit of 8 MiB",
    "stalled_calls": "the 36 calls ended {'CANCELLED': 4, 'PERMISSION_DENIED': 30, 'RESOURCE_EXHAUSTED': 2}",
    "idle_strangers": "40 of 40 calls refused; .* after idle_s",
    "injected_forward": "refused the Forward request: org1: org1 takes no message from another party",
    "second_setup": "refused the Setup request: alice: it serves run .*first .* this Setup for run .*second",
    "sklearn_spelling": "names class os.Thing, which this party's allow_classes does not list",
    "file_outside_config": "refused the Setup request: org1: the run reads this party's csv file, but its config",
    "foreign_save": "org1 serves run probeserved, so it refuses a Save for run probeother",
    "second_bind": "listen='127.0.0.1:[0-9]+': the port cannot be opened",
    "raw_connections": "200 of 200 closed by the party",
    "flood": "100 held at once; Alice's Hello answered",
}


@pytest.mark.parametrize("case", list(PROBES))
def test_each_hostile_call_is_refused_and_the_party_keeps_serving(fed, tmp_path, case):
    """Before: a stalled peer froze the party (defect 1); a second Setup replaced the run (4); the coordinator chose
    the party's files (5); a 64 MiB header cost 3 GB (6); TCP without TLS was held 120 s (7)."""
    import re

    before = peak_mb(fed.procs["org1"].pid)
    record = PROBES[case](fed, tmp_path)
    assert record["refused"] and re.search(SAYS[case], record["detail"]), record
    assert hello(fed)["name"] == "org1"
    assert peak_mb(fed.procs["org1"].pid) - before < 300  # MB: the largest frame it accepts, not a header's 50x


def test_every_refused_or_failed_request_is_a_line_of_the_partys_log_with_the_caller(fed, tmp_path):
    from vcl.testing.probes import malformed

    start = len(fed.log["org1"])
    assert attempt(lambda: hello(fed, who="intruder"))["refused"] and malformed(fed, tmp_path)["refused"]
    time.sleep(0.2)
    lines = fed.log["org1"][start:]
    assert any("org1: Hello from intruder at ipv4:127.0.0.1:" in line and "refused (PERMISSION_DENIED)" in line
               for line in lines)  # fmt: skip
    assert any("org1: Handle from alice at ipv4:127.0.0.1:" in line and "refused (INVALID_ARGUMENT)" in line
               for line in lines)  # fmt: skip


class Pause(RoundCallback):
    """Holds the run at the end of round 1 until let go."""

    def __init__(self):
        self.there, self.go = threading.Event(), threading.Event()

    def on_round_end(self, run, record):
        if record["round"] == 1:
            self.there.set()
            assert self.go.wait(120)


def test_a_second_run_is_refused_while_the_first_goes_on_to_its_own_figures(fed, tmp_path):
    """Two coordinators against one federation: the first run finished with other numbers and no error. The
    second's Setup is now refused naming both runs; the first ends as if alone; a run whose coordinator never
    ended it (killed) is taken up again by its own --resume, and by no other."""
    from vcl.coordinator.assembly import build_protocol
    from vcl.coordinator.runner import run_data

    alone = train(config(fed, str(tmp_path / "alone"), **{"run.rounds": 2}), verbose=False, write=False)
    pause, done = Pause(), {}
    first = config(fed, str(tmp_path / "first"), **{"run.rounds": 2})
    thread = threading.Thread(target=lambda: done.update(train(first, verbose=False, write=False, callbacks=[pause])))
    thread.start()
    try:
        assert pause.there.wait(120)
        with pytest.raises(VCLInputError, match=r"it serves run \S+first .*this Setup for run \S+second"):
            train(config(fed, str(tmp_path / "second")), verbose=False, write=False)
    finally:
        pause.go.set()
        thread.join()
    assert rounds_of(done) == rounds_of(alone) and done["value"] == alone["value"]
    killed = config(fed, str(tmp_path / "killed"))
    build_protocol(killed, run_data(killed))  # set up, never ended: its coordinator was killed
    with pytest.raises(VCLInputError, match=r"it serves run \S+killed"):
        train(config(fed, str(tmp_path / "other")), verbose=False, write=False)
    train(killed, verbose=False, write=False)  # the same run again, as its --resume: taken, and ended


def test_a_save_the_party_cannot_write_is_its_failure_not_its_loss(fed, tmp_path):
    """A failed Save was reported as "party org1 stopped" while the party served on."""
    set_up(fed, tmp_path)  # a run of its own: the party serves the run of the Save below (it saved for no other)
    folder = fed.folder / "org1-machine" / "org1"
    kept = folder.with_name("kept")
    if folder.exists():
        shutil.move(folder, kept)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file where the party's folder is")
    try:
        said = r"^party org1 failed its Save during round 5 \(\w+Error(: [\w ]+)? .the party.s log says more.\); it is"
        with pytest.raises(PartyFailed, match=said):
            link(fed).handle(Save("alice", "org1", 5, run="x"), "round 5")
    finally:
        folder.unlink()
        if kept.exists():
            shutil.move(kept, folder)
    assert any("Save from alice" in line and "failed: " in line for line in fed.log["org1"])
    assert hello(fed)["name"] == "org1"


def test_a_peer_that_stalls_is_blamed_and_holds_the_relaying_party_no_longer_than_the_deadline(fed, tmp_path):
    """ASCII's agents relay to each other. org2 stops (SIGSTOP) after round 1: the run ends naming org2 within the
    run's deadline, and org1 answers its coordinator's next request at once (it held its lock up to 600 s)."""
    from vcl.transports.grpc import Link

    class Stop(RoundCallback):
        def on_round_end(self, run, record):
            if record["round"] == 1:
                fed.procs["org2"].send_signal(signal.SIGSTOP)

    base = {"method": "ascii", "learner.model": ["tree"], "run.rounds": 3, "transport.deadline": 5.0}
    try:
        said = r"^party org2 did not answer during round 2: no answer came within 4 s, 0.8 × the run.s transport.dead"
        with pytest.raises(PartyLost, match=said):
            train(config(fed, str(tmp_path / "ascii"), **base), verbose=False, write=False, callbacks=[Stop()])
        start = time.perf_counter()
        where = Link("org1", f"127.0.0.1:{fed.ports['org1']}", fed.tls("alice"), 2**20, 30.0, 0).handle(
            Where("alice", "org1", 0)
        )
        assert where.place["name"] == "org1" and time.perf_counter() - start < 2.0
    finally:
        fed.procs["org2"].send_signal(signal.SIGCONT)


def test_a_party_out_of_files_to_open_serves_again_once_connections_without_tls_are_closed(tmp_path):
    """At its limit of open files a party could accept no connection for the 120 s gRPC keeps one that never
    starts TLS, and its coordinator was told the certificate was wrong; an idle connection was kept forever."""
    import grpc

    from vcl.transports.wire import SERVICE, pack

    own = {"org1": {"handshake_s": 1, "idle_s": 1}}
    with LoopbackFederation(tmp_path, ["org1"], own=own, open_files=96) as small:
        socks = [socket.create_connection(("127.0.0.1", small.ports["org1"])) for _ in range(150)]
        try:
            start = time.perf_counter()
            assert hello(small)["name"] == "org1" and time.perf_counter() - start < 4.0
        finally:
            for s in socks:
                s.close()
        tls = small.tls("alice")
        creds = grpc.ssl_channel_credentials(*(Path(tls[k]).read_bytes() for k in ("ca", "key", "cert")))
        address = f"127.0.0.1:{small.ports['org1']}"
        channel = grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override", "org1")])
        states = []
        channel.subscribe(states.append)
        next(channel.stream_stream(f"/{SERVICE}/Hello")(iter([pack("Hello", None)]), timeout=5))
        time.sleep(3)
        channel.close()
    ready = states.index(grpc.ChannelConnectivity.READY)
    assert grpc.ChannelConnectivity.IDLE in states[ready:]  # the party closed the idle connection


def test_a_sentence_about_a_partys_own_data_goes_back_without_its_values(tmp_path):
    """A refused CSV quoted its cells back to the coordinator; now the coordinator gets the sentence without them,
    and the party's log the whole sentence."""
    rows = range(40)
    alice = tmp_path / "alice.csv"
    alice.write_text("id,a0,label\n" + "".join(f"p{i},{i * 0.1:.1f},{i % 2}\n" for i in rows))
    bob = tmp_path / "bob.csv"
    bob.write_text("id,b0\n" + "".join(f"p{i},{'SECRET-CELL' if i == 7 else i}\n" for i in rows))
    own = {"alice": {"csv": str(alice)}, "bob": {"csv": str(bob)}}
    with LoopbackFederation(tmp_path / "fed", ["alice", "bob"], own=own) as two:
        settings = {"data.dataset": "csv", "data.task": "classification", "data.csv_files": [str(alice), "bob"],
                    "data.categorical": ["error", "error"], "run.rounds": 1, "compare": [], "run.device": "cpu",
                    "out": str(tmp_path / "run"), **two.overrides()}  # fmt: skip
        from vcl.config import RunConfig

        with pytest.raises(VCLInputError, match="refused the (Setup|PSI) request: bob: ") as refused:
            train(RunConfig.from_dict(settings), verbose=False, write=False)
        time.sleep(0.2)
        assert "SECRET-CELL" not in str(refused.value) and "…" in str(refused.value)
        assert any("SECRET-CELL" in line for line in two.log["bob"])


def test_sigterm_stops_a_party_at_once_even_in_the_middle_of_a_fit(tmp_path):
    """SIGTERM waited for the running handler: a party asked to stop in the middle of a long fit kept going until
    the fit ended."""
    with LoopbackFederation(tmp_path / "fed", NAMES) as three:
        long = config(three, str(tmp_path / "long"), **{"learner.epochs": 100_000, "transport.deadline": 60.0})
        failed = []
        thread = threading.Thread(target=lambda: failed.append(attempt(lambda: train(long, verbose=False,
                                                                                    write=False))))  # fmt: skip
        thread.start()
        fitting = False  # round 0 is Alice's alone; org1 fits in round 1: wait until it computes
        for _ in range(60):
            if cpu_seconds(three.procs["org1"].pid, 0.5) > 0.2:
                fitting = True
                break
        assert fitting and thread.is_alive()
        start = time.perf_counter()
        three.procs["org1"].send_signal(signal.SIGTERM)
        three.procs["org1"].wait(timeout=30)
        stopped = time.perf_counter() - start
        three.procs["org2"].send_signal(signal.SIGTERM)  # its fit would hold the coordinator's round till its end
        thread.join(timeout=60)
    assert stopped < 10.0 and failed and failed[0]["refused"] and "party org1" in failed[0]["detail"], (stopped, failed)


def cpu_seconds(pid: int, over: float) -> float:
    """The CPU seconds process ``pid`` spends in the next ``over`` seconds (Linux's /proc)."""

    def used() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = used()
    time.sleep(over)
    return used() - before


def test_a_party_intersects_and_reads_on_its_own_id_column_whatever_the_run_names(tmp_path):
    """The coordinator chose the ID column a party's IDs were intersected on (it learned which of its guessed
    e-mail addresses the party held). A party's ID column is its config's: Alice names her own "email", and Bob's
    IDs are in his "key" (his "email" holds other values, which would share none of hers)."""
    rows = range(40)
    alice = tmp_path / "alice.csv"
    alice.write_text("email,a0,label\n" + "".join(f"p{i},{i * 0.1:.1f},{i % 2}\n" for i in rows))
    bob = tmp_path / "bob.csv"
    bob.write_text("key,email\n" + "".join(f"p{i},{i}\n" for i in rows))
    own = {"alice": {"csv": str(alice), "id_column": "email"}, "bob": {"csv": str(bob), "id_column": "key"}}
    with LoopbackFederation(tmp_path / "fed", ["alice", "bob"], own=own) as two:
        from vcl.config import RunConfig

        settings = {"data.dataset": "csv", "data.task": "classification", "data.csv_files": [str(alice), "bob"],
                    "data.id_column": "email", "run.rounds": 1, "compare": [], "run.device": "cpu",
                    "out": str(tmp_path / "run"), **two.overrides()}  # fmt: skip
        done = train(RunConfig.from_dict(settings), verbose=False, write=False)
    assert done["organizations"] == ["alice", "bob"] and len(done["rounds"]) == 2


def test_a_malformed_setup_is_refused_before_the_party_imports_torch():
    """A party that did not preload answers a Setup without a run at once, not after importing torch and Lightning
    (seconds on a cold machine: past a coordinator's deadline, as seen on a GPU machine with 8 test workers)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from vcl.party.server import PartyServer\n"
        "from vcl.party.settings import PartySettings\n"
        "party = PartyServer(PartySettings(name='org1', listen='127.0.0.1:0', coordinator='alice'))\n"
        "try:\n"
        "    party.op_setup({'index': 0}, 'alice')\n"
        "except TypeError as err:\n"
        "    print(err)\n"
        "print('torch' in sys.modules, 'pytorch_lightning' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "the Setup names no run (its id, name and deadline)"
    assert out[1] == "False False"


def test_a_preloading_party_has_the_config_parser_ready_before_it_listens_and_no_scikit_learn():
    """What a Setup would otherwise make first, while every party of a run makes it at once on shared cores; not
    the method families, which would bring scikit-learn to every party."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from vcl.config import _defaults\n"
        "before = _defaults.cache_info().currsize\n"
        "from vcl.party.server import preload\n"
        "preload()\n"
        "print(before, _defaults.cache_info().currsize, 'torch' in sys.modules, 'sklearn' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "1", "True", "False"]


def test_a_save_its_own_file_system_refuses_is_the_partys_failure_and_a_refusal_by_its_rules_stays_one():
    """A party whose own folder could not be written (read-only, immutable) answered the Save with
    PERMISSION_DENIED: the coordinator took it for a refusal of its input and took back its own run directory, so the
    run could not be resumed once the folder was mended. The file system's refusal (a PermissionError with an errno)
    is now the party's own failure (INTERNAL: PartyFailed at the coordinator, which keeps what it wrote); the
    party's own rules still refuse (a state request: its state stays on its machine)."""
    import errno

    import grpc

    from vcl.messages import StateRequest
    from vcl.party.runtime import PartyRuntime
    from vcl.party.server import PartyServer
    from vcl.party.settings import PartySettings
    from vcl.transports.wire import pack_message

    class ReadOnly(PartyRuntime):
        def answer(self, request):
            raise PermissionError(errno.EACCES, "Permission denied", "parties/org1/round-5.ckpt")

    party = PartyServer(PartySettings(name="org1", listen="127.0.0.1:0", coordinator="alice"))
    party.runtime = ReadOnly(name="org1")
    with pytest.raises(Aborted) as failed:
        party.handle_call("Handle", pack_message(Save("alice", "org1", 5, run="x")), Context(), "alice")
    assert failed.value.code == grpc.StatusCode.INTERNAL and "PermissionError" in str(failed.value)
    with pytest.raises(Aborted) as refused:
        party.handle_call("Handle", pack_message(StateRequest("alice", "org1", 0)), Context(), "alice")
    assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED and "keeps its state" in str(refused.value)


def test_an_organization_refuses_a_fit_it_cannot_make_or_of_a_round_it_passed_as_malformed_input():
    """Residuals the coordinator sent malformed (no rows, the wrong row count, 100 dimensions, integers) came back
    as a RuntimeError of the party's own (INTERNAL), and a fit of an earlier round after a later one added a model:
    each is now refused as malformed input, naming what is wrong, before anything is fitted. NaN is not malformed: a
    diverging run sends it and goes on."""
    import torch

    from vcl.methods.messages import PseudoResidual
    from vcl.methods.organization import check_fit

    def fit(values, round_=3, last=2):
        check_fit("org1", PseudoResidual("alice", "org1", round_, values), 10, last)

    fit(torch.zeros(10, 3))
    fit(torch.zeros(10, 3), round_=1, last=None)
    fit(torch.full((10, 3), float("nan")))  # a diverging run's residual: fitted, as the run goes on
    for values, words in [
        (torch.zeros(0, 3), "0 × 3 values for its 10 training rows"),
        (torch.zeros(9, 3), "9 × 3 values"),
        (torch.zeros(10, 0), "10 × 0 values"),
        (torch.zeros([1] * 100), "not a 100-dimensional"),
        (torch.zeros(10, 3, dtype=torch.int64), "not a 2-dimensional torch.int64"),
    ]:
        with pytest.raises(VCLInputError, match=words):
            fit(values)
    with pytest.raises(VCLInputError, match="of round 2 after its fit of round 2"):
        fit(torch.zeros(10, 3), round_=2)


def test_a_party_that_holds_no_run_is_named_for_why_by_when():
    """FAILED_PRECONDITION is the party's "I hold no run": at start-up its Setup was refused or never reached it (the
    sentence said "it restarted", which it had not); during a round it restarted, and --resume sets it up again."""
    from types import SimpleNamespace

    import grpc

    from vcl.transports.grpc import Link

    org1 = SimpleNamespace(name="org1", address="127.0.0.1:1", deadline_is="1 s")
    held = "it holds no run (it restarted, or was never set up)"
    early = Link.error(org1, "Where", grpc.StatusCode.FAILED_PRECONDITION, held, "start-up")
    later = Link.error(org1, "Handle", grpc.StatusCode.FAILED_PRECONDITION, held, "round 2")
    assert isinstance(early, PartyLost) and "restarted" not in str(early) and "its Setup was refused" in str(early)
    assert str(later) == "party org1 stopped during round 2: it restarted and holds no run; --resume sets it up again"


def test_the_coordinators_link_calls_again_after_the_party_closed_its_idle_connection(fed):
    """A party closes a connection without a call for idle_s (3 s here; 30 s by default): the coordinator's link,
    which makes no retries, is answered on its next call over a new connection."""
    from vcl.testing.probes import fed_setting

    alice = link(fed)
    try:
        assert alice.ask("Hello")["name"] == "org1"
        time.sleep(2 * fed_setting(fed, "idle_s", 3600.0) + 6)  # past gRPC's coarse idle timer
        assert alice.ask("Hello")["name"] == "org1"
    finally:
        alice.close()
