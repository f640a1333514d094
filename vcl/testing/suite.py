"""The transport contract as tests: one suite that every transport passes, vcl's own and one written outside it
(docs/extending.md, "Write a transport"). Each case's reference is the local transport with ``run.concurrent: false``,
run once per pytest process."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest

from vcl.callbacks import RoundCallback, RoundCheckpoint
from vcl.config import RunConfig
from vcl.coordinator.assembly import build_protocol
from vcl.coordinator.runner import RunInterrupted, run_data, train
from vcl.methods.messages import FittedValues, PredictionRequest, PseudoResidual

GAL_NAMES = ["alice", "org1", "org2"]
DC_NAMES = ["party1.1", "party1.2", "party2.1", "party2.2", "experimenter"]
MPDL_NAMES = ["a", "b", "experimenter"]
PARTY_NAMES = list(dict.fromkeys(GAL_NAMES + DC_NAMES + MPDL_NAMES))  # every party the suite's runs have
# the settings each party keeps in its own copy of the config, never in the coordinator's (MPDL's own secrets)
PARTY_SETTINGS = {
    "a": {"secrets": {"mpdl.secret_a": 0xA5EC}},
    "b": {"secrets": {"mpdl.secret_b": 0xB5EC}},
    "org1": {"keep_messages": True},
}  # a party's own choice to keep what crosses (off by default)

BASE = {
    "data.dataset": "wine",
    "data.organizations": 3,
    "run.rounds": 2,
    "learner.epochs": 5,
    "learner.milestones": [10],
    "compare": [],
    "run.device": "cpu",
}
# each case: its settings and its parties' names
CASES = {
    "gal+alone+late": ({"method": "gal", "compare": ["alone", "late"]}, GAL_NAMES),
    "al+dp": ({"method": "al", "gal.local_loss": ["l1"], "gal.privacy": "dp", "gal.privacy_secret": 7}, GAL_NAMES),
    "ascii": ({"method": "ascii", "learner.model": ["tree"], "compare": ["ascii_simple"]}, GAL_NAMES),
    "interm": ({"method": "interm", "learner.model": ["mlp"]}, GAL_NAMES),
    "dc_smote": (
        {"method": "dc_smote", "dc.public_rows": 30, "dc.anchor_rows": 100, "dc.dim": 3, "dc.smote_k": 10,
         "run.rounds": 1, "compare": ["centralized", "local"]},
        DC_NAMES,
    ),
    "mpdl": (
        {"method": "mpdl", "data.dataset": "breast_cancer", "data.test_fraction": 0.1, "mpdl.gamma": 0.2,
         "mpdl.max_rows": 240, "mpdl.dual_epochs": 2, "mpdl.central_epochs": 3, "mpdl.paillier": True,
         "mpdl.key_bits": 256, "mpdl.secret_a": 0xA5EC, "mpdl.secret_b": 0xB5EC, "compare": ["ftl"]},
        MPDL_NAMES,
    ),
}  # fmt: skip
_references: dict[str, dict] = {}


def config(out: Path, **settings) -> RunConfig:
    return RunConfig.from_dict({**BASE, **settings, "out": str(out)})


def rounds_of(results: dict) -> list:
    """Each round's number, metrics and bytes: what two runs of one config share exactly, whatever carried them."""
    return [(r["round"], r["metrics"], r["bytes_sent"]) for r in results["rounds"]]


def scores_of(results: dict) -> list[dict]:
    """Each round's scores (DC's and MPDL's diagnostics), not their seconds."""
    return [{k: v for k, v in r.get("scores", {}).items() if "seconds" not in k} for r in results["rounds"]]


def assert_same_run(a: dict, b: dict) -> None:
    """Two runs of one config (on two transports) gave the same rounds, value, bytes and comparisons; the scores
    to 1e-6 (a party in its own process sums some diagnostics with another number of threads)."""
    for x, y in [(a, b)] + [(a["compare"][m], b["compare"].get(m)) for m in a["compare"]]:
        assert y is not None and rounds_of(x) == rounds_of(y)
        keys = ("value", "bytes_sent", "prediction_bytes", "organizations")
        assert tuple(x.get(k) for k in keys) == tuple(y.get(k) for k in keys)
        for s, t in zip(scores_of(x), scores_of(y), strict=True):
            assert s.keys() == t.keys() and all(s[k] == pytest.approx(t[k], rel=1e-6) for k in s), (s, t)
    assert set(a["compare"]) == set(b["compare"])


def reference(case: str, settings: dict) -> dict:
    """The case run in one process, each party fitting alone (once per pytest process)."""
    if case not in _references:
        out = Path(tempfile.mkdtemp(prefix="vcl-reference-"))
        atexit.register(shutil.rmtree, out, ignore_errors=True)  # the folder this suite made, at the process's end
        _references[case] = train(config(out, **settings, **{"run.concurrent": False}), verbose=False)
    return _references[case]


def ledger_of(cfg: RunConfig) -> list[tuple]:
    """One request of a pseudo-residual to every party of a GAL run, in the reverse of the run's order: each reply
    is its own party's ``FittedValues``, in the order asked; a message to a party the run does not have is refused
    before anything is sent. The ledger's lines (kind, sender, receiver, shapes, bytes), in the order counted."""
    protocol = build_protocol(cfg, run_data(cfg))
    try:
        fed = protocol.federation
        residual = protocol.task.pseudo_residual(protocol.F["train"], protocol.labels["train"])
        order = list(reversed(fed.names))
        replies = fed.request_all((n, PseudoResidual(fed.alice, n, 1, residual)) for n in order)
        assert [type(r) for r in replies] == [FittedValues] * len(order)
        assert [(r.sender, r.receiver, r.round) for r in replies] == [(n, fed.alice, 1) for n in order]
        counted = len(fed.channel.records)
        with pytest.raises(ValueError, match="cannot go to party"):
            fed.request("mallory", PredictionRequest(fed.alice, "mallory", 1, "test"))
        assert len(fed.channel.records) == counted
        return [(r.kind, r.sender, r.receiver, r.shapes, r.nbytes) for r in fed.channel.records]
    finally:
        protocol.federation.close()


class Crash(RoundCallback):
    """Stops a run at the end of round ``at`` (after its checkpoint), as Ctrl-C would."""

    def __init__(self, at: int):
        self.at = at

    def on_round_end(self, run, record):
        if record["round"] == self.at:
            raise KeyboardInterrupt


class TransportSuite:
    """What every transport shows. A subclass gives the fixture ``transport`` (names → config settings) and
    ``apart``: whether its parties run in processes of their own."""

    apart = False

    @pytest.fixture
    def transport(self):
        raise NotImplementedError("a TransportSuite subclass gives the fixture `transport`")

    @pytest.mark.parametrize("case", list(CASES))
    def test_a_run_equals_one_process(self, transport, tmp_path, case):
        settings, names = CASES[case]
        expected = reference(case, settings)
        got = train(config(tmp_path / "run", **settings, **transport(names)), verbose=False)
        assert_same_run(got, expected)
        assert got["bytes_sent"] > 0 or case == "interm" and got["bytes_sent"] == expected["bytes_sent"]
        where = got["parties"]  # each party says where it runs, in the order of the run's parties
        assert [p["name"] for p in where] == [p["name"] for p in expected["parties"]]
        assert all(p["host"] and p["pid"] and p["device"] for p in where)
        pids = {p["pid"] for p in where}
        if self.apart:
            assert len(pids) == len(where) and got["coordinator_pid"] not in pids
        else:
            assert pids == {got["coordinator_pid"]}

    def test_replies_come_back_in_the_order_asked_each_message_counted_once(self, transport, tmp_path):
        """Unit level, on one request to every party in the reverse of the run's order (:func:`ledger_of`): each
        message and each reply counted once, in the order asked, with the bytes of the local transport's."""
        settings = {**CASES["gal+alone+late"][0], "compare": []}
        got = ledger_of(config(tmp_path / "run", **settings, **transport(GAL_NAMES)))
        expected = ledger_of(config(tmp_path / "one", **settings))
        assert got == expected and len(got) == 2 * len(GAL_NAMES)  # the messages, then their replies
        names = list(reversed(GAL_NAMES))
        assert [line[:3] for line in got] == [("PseudoResidual", "alice", n) for n in names] + [
            ("FittedValues", n, "alice") for n in names
        ]

    def test_a_stopped_run_resumes_to_the_uninterrupted_run(self, transport, tmp_path):
        settings = {**CASES["gal+alone+late"][0], "run.rounds": 3, "compare": []}
        expected = reference("gal, three rounds", settings)
        run = config(tmp_path / "run", **settings, **transport(GAL_NAMES))
        with pytest.raises(RunInterrupted) as stopped:
            train(run, verbose=False, callbacks=[RoundCheckpoint(), Crash(2)])
        assert stopped.value.saved_round == 2
        resumed = train(run, resume=True, verbose=False)
        assert_same_run(resumed, expected)
