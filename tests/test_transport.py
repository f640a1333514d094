"""The organization boundary: parties are reached only by messages, through a transport that counts them."""

import json

import pytest
import torch
from vcl.datamodules import TabularDataModule

from vcl.config import RunConfig
from vcl.coordinator.assembly import build_protocol
from vcl.coordinator.federation import Federation
from vcl.coordinator.runner import Run, run_rounds
from vcl.errors import PartyLost
from vcl.family import Party
from vcl.messages import Ack, Placed, Where
from vcl.methods.ascii.messages import ClassVotes, Discarded, IgnoranceScores
from vcl.methods.messages import FittedValues, ModelsReport, PredictionRequest, PseudoResidual
from vcl.testing.suite import TransportSuite
from vcl.transport import Transport
from vcl.transports.local import LocalTransport


class BoundaryCrossed(Exception):
    """Not an AttributeError, so no ``hasattr`` or ``getattr(..., default)`` can swallow it."""


class Guarded(Party):
    """A party seen from outside: the :class:`vcl.family.Party` interface, nothing else."""

    allowed = tuple(n for n in vars(Party) if not n.startswith("_") and n != "name")  # its host knows its name

    def __init__(self, party):
        object.__setattr__(self, "_party", party)

    def __getattribute__(self, name):
        if name in Guarded.allowed:
            return getattr(object.__getattribute__(self, "_party"), name)
        raise BoundaryCrossed(f"{name!r} read from outside the party")

    def __setattr__(self, name, value):
        raise BoundaryCrossed(f"{name!r} set from outside the party")


def protocol_for(cfg):
    dm = TabularDataModule(cfg.data.dataset, organizations=cfg.data.organizations, feature_seed=cfg.run.seed)
    dm.setup()
    return build_protocol(cfg, dm.data)


def guard(protocol):
    """The same parties, each behind a :class:`Guarded` wrapper, on a fresh local transport."""
    fed = protocol.federation
    parties = {n: Guarded(fed.transport.party(n)) for n in fed.names}
    fed.transport = LocalTransport(parties, fed.channel)  # a plain host: each party reached through its interface
    return protocol


def results(protocol, cfg):
    r = Run(cfg, protocol, None, verbose=False)
    run_rounds(r, [], cfg.run.rounds)
    out = r.results({})
    for timing in ("seconds", "round_seconds"):
        out.pop(timing)
    out["rounds"] = [{k: v for k, v in record.items() if "seconds" not in k} for record in out["rounds"]]
    return out


def test_a_guarded_party_refuses_everything_but_messages(tiny):
    protocol = guard(protocol_for(tiny(**{"run.rounds": 1})))
    party = protocol.federation.transport.party("org1")
    for name in ("predict", "name", "_view", "_models", "stored_parameters", "add_rows"):
        with pytest.raises(BoundaryCrossed):
            getattr(party, name)
    reply = protocol.federation.request("org1", PredictionRequest("alice", "org1", 0, "test"))
    assert isinstance(reply, FittedValues) and reply.values == {}  # no model yet


CASES = {
    "gal": {},
    "gal sequential": {"run.concurrent": False},
    "alone": {"method": "alone"},
    "joint": {"method": "joint"},
    "al": {"method": "al"},
    "al authors": {"method": "al", "gal.al_mode": "authors"},
    "dms": {"learner.model": ["mlp"], "gal.dms": True},
    "late": {"method": "late"},
    "interm": {"method": "interm", "learner.model": ["mlp"]},
    "privacy": {"gal.privacy": "dp", "gal.privacy_secret": 7},  # Alice's secret, given: two runs draw alike
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_gal_family_runs_with_every_party_behind_the_guard(tiny, case):
    cfg = tiny(**{"run.rounds": 2}, **CASES[case])
    torch.manual_seed(0)
    guarded = results(guard(protocol_for(cfg)), cfg)
    torch.manual_seed(0)
    alone = tiny(**{"run.rounds": 2, **CASES[case], "run.concurrent": False})  # behind the guard each answers alone
    plain = results(protocol_for(alone), alone)
    guarded["config"] = plain["config"] = None  # the two runs differ in run.concurrent only
    assert guarded == plain


ASCII = {"learner.model": ["tree"], "learner.max_depth": 2, "data.organizations": 4, "run.rounds": 3}
ASCII_CASES = {
    "ascii": {"method": "ascii"},
    "ascii paper alpha": {"method": "ascii", "ascii.alpha": "paper"},
    "ascii_simple": {"method": "ascii_simple"},
    "ascii_random paper alpha": {"method": "ascii_random", "ascii.alpha": "paper"},
    "ensemble_adaboost": {"method": "ensemble_adaboost"},
    "single": {"method": "single"},
    "oracle": {"method": "oracle"},
    "ascii alpha stop": {"method": "ascii", "ascii.alpha": "paper", "data.organizations": 6, "learner.max_depth": 1},
}


@pytest.mark.parametrize("case", list(ASCII_CASES))
def test_ascii_runs_with_every_agent_behind_the_guard(tiny, case):
    """Same results and the same bytes per round; the scores go agent to agent, never back to Alice."""
    cfg = tiny(**{**ASCII, **ASCII_CASES[case]})
    torch.manual_seed(0)
    protocol = guard(protocol_for(cfg))
    sent, replies = [], []
    protocol.federation.channel.tap = lambda m: sent.append(m) or m
    request_all = protocol.federation.request_all

    def tapped(requests):
        out = request_all(requests)
        replies.extend(out)
        return out

    protocol.federation.request_all = tapped
    guarded = results(protocol, cfg)
    torch.manual_seed(0)
    plain = results(protocol_for(cfg), cfg)
    assert guarded == plain
    # what Alice's coordinator gets back: acknowledgements, votes with α, discarded models, model counts
    assert {type(r) for r in replies} <= {Ack, ClassVotes, Discarded, ModelsReport}
    # the scores crossed (counted once each, agent → next agent) without ever being a reply to Alice
    assert any(isinstance(m, IgnoranceScores) for m in sent)
    assert "carry" not in protocol.state_dict()  # the scores wait at the agent that gets them, not at Alice
    if case == "ascii alpha stop":
        assert guarded["rounds"][-1]["stopped"].startswith("alpha <= 0") and Discarded in {type(r) for r in replies}


def test_an_ascii_checkpoint_is_data_only_and_resumes_the_chain(tiny, tmp_path):
    """The scores in flight between rounds sit in the receiving agent's checkpoint, loadable as weights only."""
    cfg = tiny(**{**ASCII, "method": "ascii", "ascii.alpha": "paper"})
    full = protocol_for(cfg)
    for _ in range(3):
        full.run_round()
    cut = protocol_for(cfg)
    cut.run_round()
    torch.save(cut.state_dict(), tmp_path / "state.pt")
    resumed = guard(protocol_for(cfg))
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    for _ in range(2):
        resumed.run_round()
    assert [r["alphas"] for r in resumed.history] == [r["alphas"] for r in full.history]
    assert resumed.federation.channel.bytes_by_round() == full.federation.channel.bytes_by_round()
    torch.testing.assert_close(resumed.F["test"], full.F["test"])


class Chatty(Party):
    """A party that sends a message in another party's name."""

    name = "org1"

    def handle(self, message):
        return Ack("org1", message.sender, message.round)

    def outgoing(self):
        return [IgnoranceScores("org2", "org3", 1, scores=torch.ones(3), alphas=torch.ones(0))]


def test_a_party_to_party_message_must_come_from_its_sender():
    federation = Federation({"alice": Chatty(), "org1": Chatty(), "org3": Chatty()})
    with pytest.raises(ValueError, match="cannot send"):
        federation.request("org1", PredictionRequest("alice", "org1", 0, "test"))


def test_the_ledger_counts_every_message_and_reply_the_same_for_concurrent_and_sequential(tiny):
    """Per round, and equal to the figures before parties moved behind the transport (wine, M = 4)."""
    figures = {}
    for concurrent in (True, False):
        cfg = tiny(**{"run.rounds": 2, "run.concurrent": concurrent, "learner.model": ["linear", "mlp", "gb", "svm"]})
        out = results(protocol_for(cfg), cfg)
        figures[concurrent] = [r["bytes_sent"] for r in out["rounds"]], out["prediction_bytes"]
    assert figures[True] == figures[False] == ([0, 11520, 11520], 12816)
    late = results(protocol_for(tiny(method="late", **{"run.rounds": 1})), tiny(method="late", **{"run.rounds": 1}))
    assert [r["bytes_sent"] for r in late["rounds"]] == [0, 11520] and late["prediction_bytes"] == 6408


def test_request_all_concurrent_equals_sequential(tiny):
    cfg = tiny(**{"learner.model": ["linear", "linear", "mlp", "mlp"]})
    replies = {}
    for concurrent in (True, False):
        protocol = protocol_for(tiny(**{**cfg.to_dict(), "run.concurrent": concurrent}))
        fed = protocol.federation
        residual = protocol.task.pseudo_residual(protocol.F["train"], protocol.labels["train"])
        requests = [(n, PseudoResidual(fed.alice, n, 1, residual)) for n in fed.names]
        replies[concurrent] = fed.request_all(requests)
        assert len(fed.channel.records) == 2 * len(requests)  # each message and each reply
    for a, b in zip(replies[True], replies[False], strict=True):
        assert a.sender == b.sender and a.receiver == b.receiver == "alice"
        for split in a.values:
            torch.testing.assert_close(a.values[split], b.values[split], rtol=1e-4, atol=1e-5)


def test_a_message_goes_only_to_the_party_it_names(tiny):
    federation = protocol_for(tiny()).federation
    with pytest.raises(ValueError, match="cannot go to party"):
        federation.request("org2", PredictionRequest("alice", "org1", 0, "test"))
    with pytest.raises(ValueError, match="cannot go to party"):
        federation.request("mallory", PredictionRequest("alice", "mallory", 0, "test"))


@pytest.mark.parametrize("method", ["dc_smote", "dc_rand", "centralized", "local"])
def test_dc_runs_with_every_worker_and_the_experimenter_behind_the_guard(tmp_path, method):
    """The master reaches the c × d workers and the experimenter only by messages: the same results."""
    from vcl.coordinator.assembly import datamodule_for

    cfg = RunConfig.from_dict(
        dict(
            method=method,
            **{"data.dataset": "wine", "dc.public_rows": 30, "dc.anchor_rows": 100, "dc.dim": 3, "dc.smote_k": 10},
        )
        | dict(**{"dc.row_groups": 2, "run.rounds": 1, "run.device": "cpu"}, compare=[], out=str(tmp_path / "dc"))
    )
    dm = datamodule_for(cfg)
    dm.setup()
    guarded = results(guard(build_protocol(cfg, dm.data)), cfg)
    assert guarded == results(build_protocol(cfg, dm.data), cfg)
    assert guarded["rounds"][1]["scores"]["accuracy"] > 0.5


@pytest.mark.parametrize("method", ["mpdl", "ftl"])
def test_mpdl_and_ftl_run_with_both_parties_and_the_experimenter_behind_the_guard(tmp_path, method):
    """The collaborator reaches A, B and the experimenter only by messages: the same results."""
    from vcl.coordinator.assembly import datamodule_for

    cfg = RunConfig.from_dict(
        dict(
            method=method,
            **{"data.dataset": "breast_cancer", "mpdl.gamma": 0.2, "mpdl.max_rows": 200},
        )
        | dict(
            **{"mpdl.dual_epochs": 1, "mpdl.central_epochs": 2, "run.rounds": 2, "run.device": "cpu"},
            **{"mpdl.secret_a": 0xA5EC, "mpdl.secret_b": 0xB5EC},
            compare=[],
            out=str(tmp_path / "m"),
        )
    )
    dm = datamodule_for(cfg)
    dm.setup()
    guarded = results(guard(build_protocol(cfg, dm.data)), cfg)
    plain = results(build_protocol(cfg, dm.data), cfg)
    for r in guarded["rounds"] + plain["rounds"]:
        for key in ("psi_seconds", "dual_seconds_per_epoch"):
            r.get("scores", {}).pop(key, None)
    assert json.dumps(guarded, sort_keys=True) == json.dumps(plain, sort_keys=True)  # round 0's loss is NaN


@pytest.mark.slow
class TestLocal(TransportSuite):
    """The transport suite (:mod:`vcl.testing.suite`) with every party in this process, each fitting alone."""

    @pytest.fixture
    def transport(self):
        return lambda names: {"transport.kind": "local", "run.concurrent": False}


@pytest.mark.slow
class TestWritten(TransportSuite):
    """The suite on a transport written outside vcl (``tests/wire_transport.py``, every message crossing as a frame
    of the wire format), named by its class path as a user's own is."""

    @pytest.fixture
    def transport(self):
        return lambda names: {"transport.kind": "tests.wire_transport.WireTransport", "run.concurrent": False}


class Losing(Transport):
    """A transport whose party ``lost`` answers nothing from round 2 on: its PartyLost stands in its place."""

    def __init__(self, names, lost: str, skip: bool):
        super().__init__(names, skip_missing=skip)
        self.lost, self.asked = lost, []

    def deliver(self, requests):
        self.asked.append([party for party, _ in requests])
        return [
            PartyLost(party, "its process ended") if party == self.lost and message.round >= 2 else
            Placed(party, message.sender, message.round, place={"name": party}) if isinstance(message, Where) else
            Ack(party, message.sender, message.round)
            for party, message in requests
        ]  # fmt: skip

    def relay(self, parties):
        pass


def test_a_lost_party_is_left_out_under_skip_and_ends_the_run_otherwise():
    """The coordinator's side of every transport (vcl.coordinator.federation): under run.missing_parties: skip a lost
    party's place holds None and it is not asked again; without skip, or when Alice is the one lost, the run ends."""
    names = ["alice", "org1", "org2"]

    def ask(fed, round_):
        return fed.request_all((n, PredictionRequest("alice", n, round_, "test")) for n in names)

    transport = Losing(names, "org2", skip=True)
    fed = Federation(transport=transport)
    assert [r.sender for r in ask(fed, 1)] == names and fed.missing() == []
    assert [r and r.sender for r in ask(fed, 2)] == ["alice", "org1", None] and fed.missing() == ["org2"]
    assert [r and r.sender for r in ask(fed, 3)] == ["alice", "org1", None]
    assert transport.asked[-1] == ["alice", "org1"]  # no message goes to a party left out
    assert len(fed.channel.records) == 2 * 3 + (2 * 2 + 1) + 2 * 2  # org2's round-2 message counted, no reply
    assert [p["name"] for p in fed.where()] == ["alice", "org1"]  # the runtime's requests too go to those present
    assert transport.asked[-1] == ["alice", "org1"] and len(fed.channel.records) == 2 * 3 + 5 + 4  # not counted
    with pytest.raises(PartyLost, match="org2"):
        ask(Federation(transport=Losing(names, "org2", skip=False)), 2)
    with pytest.raises(PartyLost, match="alice"):
        ask(Federation(transport=Losing(names, "alice", skip=True)), 2)
