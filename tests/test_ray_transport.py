"""Parties in their own processes (transport: ray): the same results as one process, the same ledger, a
lost party named in one sentence and a resume that ends as an uninterrupted run, and the CSV boundary."""

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from vcl.callbacks import RoundCallback, RoundCheckpoint

from tests.helpers import TINY_DC, Stop, rounds_of
from vcl.coordinator.runner import train
from vcl.errors import PartyLost, VCLInputError
from vcl.testing.suite import TransportSuite

pytestmark = [pytest.mark.usefixtures("ray_cluster"), pytest.mark.slow]


class TestRay(TransportSuite):
    """The transport suite (:mod:`vcl.testing.suite`) with every party a Ray actor."""

    apart = True

    @pytest.fixture
    def transport(self):
        return lambda names: {"transport.kind": "ray"}


class KillParty(RoundCallback):
    """Ends one party's process at the end of round ``at`` (after its checkpoint), as a crashed node would."""

    def __init__(self, at, party):
        self.at, self.party = at, party

    def on_round_end(self, run, record):
        if record["round"] == self.at:
            os.kill(run.protocol.federation.transport.pids()[self.party], signal.SIGKILL)


def test_a_lost_party_ends_the_run_in_one_sentence_and_resume_equals_uninterrupted(tiny, tmp_path, capsys):
    base = {"data.organizations": 3, "run.rounds": 3, "learner.epochs": 5}
    whole = train(
        tiny(out=str(tmp_path / "whole"), **{"run.concurrent": False}, **base), verbose=False
    )  # = ray's (above)
    elsewhere = tmp_path / "org2s-machine"  # org2 keeps its checkpoints in its own place (party_dirs)
    config = tiny(
        out=str(tmp_path / "cut"), **{"transport.kind": "ray", "transport.party_dirs": ["", "", str(elsewhere)]}, **base
    )
    with pytest.raises(PartyLost, match=r"^party org2 stopped during round 2: its process ended$") as lost:
        train(config, verbose=False, callbacks=[RoundCheckpoint(), KillParty(1, "org2")])
    assert lost.value.saved_round == 1
    resumed = train(config, resume=True, verbose=False)
    assert rounds_of(resumed) == rounds_of(whole) and resumed["value"] == whole["value"]
    assert sorted(p.name for p in (tmp_path / "cut" / "parties").iterdir()) == ["alice", "org1"]
    assert [p.name for p in (elsewhere / "org2").glob("round-*")] == ["round-3.ckpt"]  # older rounds pruned by org2
    assert any((elsewhere / "org2" / "tensorboard").iterdir())  # its own training log, where it runs


def test_the_cli_names_the_lost_party_and_the_resume_command(tiny, tmp_path, capsys, monkeypatch):
    import train as cli
    import vcl.coordinator.runner

    monkeypatch.setattr(
        vcl.coordinator.runner, "default_callbacks", lambda *a, **k: [RoundCheckpoint(), KillParty(1, "alice")]
    )
    out = tmp_path / "cli"
    code = cli.main(
        [
            "--transport.kind",
            "ray",
            "--data.organizations",
            "2",
            "--run.rounds",
            "2",
            "--learner.epochs",
            "3",
            "--compare",
            "--run.device",
            "cpu",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert err[0].startswith("error: party alice stopped during round 2: its process ended; round 1 is saved in")
    assert err[0].endswith("--resume")


def test_the_parties_ask_for_more_than_the_cluster_has(tiny):
    with pytest.raises(VCLInputError, match=r"ask for 400 CPUs .* the Ray cluster has 8"):
        train(tiny(**{"transport.kind": "ray", "transport.party_cpus": [100.0]}), verbose=False, write=False)


DC = TINY_DC


def write_party_files(folder: Path, n=60, seed=0):
    """Three organizations' CSV files; Bob's and Carol's feature values are marked so that any copy is found."""
    rng = np.random.RandomState(seed)
    ids = [f"p{i:03d}" for i in rng.permutation(n)]
    x = rng.randn(n, 5)
    label = (x[:, 0] + x[:, 2] + x[:, 4] > 0).astype(int)
    files = []
    for name, cols, extra in (("alice", [0, 1], ["label"]), ("bob", [2, 3], []), ("carol", [4], [])):
        lines = [",".join(["id"] + [f"{name}{c}" for c in cols] + extra)]
        for i in range(n):
            values = [f"{x[i, c]:.6f}" for c in cols] + ([str(label[i])] if extra else [])
            lines.append(",".join([ids[i]] + values))
        path = folder / f"{name}.csv"
        path.write_text("\n".join(lines[:1] + lines[1:][::-1] if name == "bob" else lines) + "\n")
        files.append(str(path))
    return files


def test_csv_the_coordinator_opens_only_alices_file_and_gets_no_other_feature(tiny, tmp_path):
    files = write_party_files(tmp_path)
    opened = []

    def audit(event, args):
        if event == "open" and isinstance(args[0], (str, os.PathLike)) and str(args[0]).endswith(".csv"):
            opened.append(Path(args[0]).name)

    sys.addaudithook(audit)  # audit hooks cannot be removed: this one only records names of .csv files
    received = []
    from vcl.transports import ray as ray_transport

    deliver = ray_transport.RayTransport.deliver

    def tapped(self, requests):
        replies = deliver(self, requests)
        received.extend(replies)
        return replies

    config = tiny(
        **{
            "data.dataset": "csv",
            "data.csv_files": files,
            "data.task": "classification",
            "transport.kind": "ray",
            "run.rounds": 2,
            "learner.epochs": 5,
            "run.audit": True,  # scored by the experimenter, a Ray task: outside Alice's process
        },
        out=str(tmp_path / "ray"),
    )
    ray_transport.RayTransport.deliver = tapped
    try:
        ray_run = train(config, verbose=False)
    finally:
        ray_transport.RayTransport.deliver = deliver
    assert set(opened) == {"alice.csv"}  # the coordinator's process opened Alice's file and no other, audit on
    kinds = {type(r).__name__ for r in received} - {"Ack"}  # Ack: a runtime's "saved", carrying nothing of the data
    assert kinds == {"FittedValues", "ModelsReport"}  # model outputs, counts
    local = train(
        tiny(
            **{
                "data.dataset": "csv",
                "data.csv_files": files,
                "data.task": "classification",
                "run.rounds": 2,
                "learner.epochs": 5,
                "run.concurrent": False,
                "run.audit": True,
            },
            out=str(tmp_path / "local"),
        ),
        verbose=False,
    )
    assert rounds_of(ray_run) == rounds_of(local) and ray_run["organizations"] == ["alice", "bob", "carol"]
    assert ray_run["privacy"]["attacks"] and ray_run["privacy"]["attacks"] == local["privacy"]["attacks"]


def test_a_benchmark_spread_over_workers_gives_the_records_of_one_by_one(tiny):
    from vcl.coordinator.sweep import Job, run_jobs

    jobs = [
        Job(
            "t",
            tiny(**{"data.organizations": 2, "run.rounds": 2, "learner.epochs": 5, "run.seed": seed}, method=method),
            method,
            "linear",
            None,
            {"k": i},
        )
        for i, (seed, method) in enumerate([(0, "gal"), (1, "gal"), (0, "al"), (0, "alone")])
    ]
    timeless = [{k: v for k, v in r.items() if "seconds" not in k} for r in run_jobs(jobs, workers=1)]
    spread = [{k: v for k, v in r.items() if "seconds" not in k} for r in run_jobs(jobs, workers=2)]
    assert spread == timeless and [r["k"] for r in spread] == [0, 1, 2, 3]


def test_a_benchmark_job_has_the_threads_its_cpus_give_whatever_the_workers():
    """8 of 80 gal_uci records differed between --workers 1 and 2 (up to 0.3 %): one by one, a job had the
    process's threads, as a Ray task int(--cpus-per-run); float sums depend on how many threads share them."""
    import torch

    from vcl.coordinator.sweep import run_jobs

    jobs = [torch.get_num_threads] * 2
    for cpus in (1.0, 2.0):
        assert run_jobs(jobs, workers=1, cpus=cpus) == run_jobs(jobs, workers=2, cpus=cpus) == [int(cpus)] * 2


CALLS: list[int] = []


def _square(x: int, stop_at: int | None = None) -> dict:
    if x == stop_at:
        raise KeyboardInterrupt  # the benchmark stopped part way
    CALLS.append(x)
    return {"x": x, "square": x * x}


def test_a_stopped_benchmark_resumed_runs_only_what_it_had_not_finished(tmp_path):
    """The journal keeps each finished run; --resume takes those and runs the rest, so the records equal one whole
    run's; a run whose settings changed is run again, and without --resume the journal starts anew."""
    from functools import partial

    from vcl.coordinator import sweep
    from vcl.coordinator.sweep import run_jobs

    journal = tmp_path / "out.json.partial.jsonl"
    whole = run_jobs([partial(_square, x) for x in range(4)])
    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        run_jobs([partial(_square, x, stop_at=2) for x in range(4)], journal=journal)
    assert CALLS == [0, 1] and len(journal.read_text().splitlines()) == 2
    CALLS.clear()
    jobs = [partial(_square, x, stop_at=2) for x in range(2)] + [partial(_square, x) for x in range(2, 4)]
    assert run_jobs(jobs, journal=journal, resume=True) == whole and CALLS == [2, 3]
    CALLS.clear()
    changed = [partial(_square, x, stop_at=9) for x in range(4)]  # other settings: nothing held counts
    assert run_jobs(changed, journal=journal, resume=True) == whole and CALLS == [0, 1, 2, 3]
    CALLS.clear()
    sweep._STARTED.clear()  # a new process, without --resume: the journal starts anew
    assert run_jobs(changed, journal=journal) == whole and CALLS == [0, 1, 2, 3]
    assert len(journal.read_text().splitlines()) == 4


def test_a_benchmark_removes_its_journal_once_its_record_is_written(tmp_path):
    import argparse
    from functools import partial

    from tests.helpers import benchmark

    common = benchmark("common")
    args = common.add_cluster_args(argparse.ArgumentParser()).parse_args(["--resume"])
    args.out = str(tmp_path / "r.json")
    records = common.run_all([partial(_square, 3)], args)
    assert (tmp_path / "r.json.partial.jsonl").exists()
    common.write_records(records, args.out)
    assert not (tmp_path / "r.json.partial.jsonl").exists() and (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"transport.kind": "carrier"},
            r"^transport.kind='carrier' is no transport; use local, ray, grpc, or the class path of your own "
            r"\(my_pkg.module.MyTransport\)\.$",
        ),
        (
            {"transport.kind": "my_pkg.Nope"},
            r"^transport.kind=my_pkg.Nope: cannot import my_pkg.Nope \(No module named 'my_pkg'\); put its package on "
            r"PYTHONPATH or fix the class_path\.$",
        ),
        (
            {"transport.kind": "vcl.messages.Channel"},
            r"^transport.kind=vcl.messages.Channel: vcl.messages.Channel is not a transport; name a subclass of "
            r"vcl.transport.Transport\.$",
        ),
        (
            {"transport.kind": "ray", "transport.party_cpus": [1.0, 1.0, 1.0]},
            r"^transport.party_cpus lists 3 values for the 4 parties of this run \(alice, org1, org2, org3\); give one "
            r"value for all, or one per party in that order\.$",
        ),
        (
            {"transport.kind": "ray", "transport.party_gpus": [-1.0]},
            r"^config: transport.party_gpus=\[-1.0\] is not valid; it takes a number >= 0 or a list of a number "
            r">= 0\.$",
        ),
        ({"transport.party_dirs": ["a", "b"]}, r"^transport.party_dirs lists 2 values for 4 parties; give 1 or 4\.$"),
    ],
)
def test_bad_transport_settings_are_one_sentence_before_any_party_starts(tiny, overrides, message):
    with pytest.raises(VCLInputError, match=message):
        train(tiny(**overrides), verbose=False, write=False)


MPDL = {
    "data.dataset": "breast_cancer",
    "data.test_fraction": 0.1,
    "mpdl.gamma": 0.2,
    "mpdl.max_rows": 240,
}
MPDL |= {"mpdl.dual_epochs": 2, "mpdl.central_epochs": 2, "mpdl.threshold": 1.0}
MPDL |= {"mpdl.secret_a": 0xA5EC, "mpdl.secret_b": 0xB5EC}  # each party's own, reaching only its actor


def test_a_messy_csv_prepared_by_each_party_in_its_own_process(tiny, tmp_path):
    """categorical: onehot, missing: drop — each actor reads and prepares its own file; the coordinator aligns
    on the complete rows each party offers; the run is the one-process run."""
    from tests.test_datamodules import messy_files

    files, _, _ = messy_files(tmp_path, n=60)
    base = {
        "data.dataset": "csv",
        "data.csv_files": [str(f) for f in files],
        "data.task": "classification",
        "data.organizations": 2,
        "run.rounds": 2,
    }
    base |= {"data.categorical": ["onehot"], "data.missing": ["impute", "drop"], "learner.epochs": 5}
    local = train(tiny(**{"run.concurrent": False}, out=str(tmp_path / "local"), **base), verbose=False)
    ray_run = train(tiny(**{"transport.kind": "ray"}, out=str(tmp_path / "ray"), **base), verbose=False)
    assert rounds_of(ray_run) == rounds_of(local) and ray_run["bytes_sent"] == local["bytes_sent"]


def whole_rounds(results):
    """Every per-round figure (η, weights, coefficients, training loss, metrics, bytes), not the seconds."""
    return [{k: v for k, v in r.items() if "seconds" not in k} for r in results["rounds"]]


def test_ray_equals_sequential_fits_in_every_round_figure_and_concurrent_ones_to_1e_5(tiny, tmp_path):
    """What docs/transport.md says: every party fits alone under ray, as the local transport does with
    run.concurrent false (equal bit for bit); its default fits organizations together in one vmapped pass, whose
    sums run in another order (per-round figures agree to 1e-5 relative, the metrics on the test rows exactly)."""
    base = {"data.organizations": 3, "run.rounds": 3, "learner.epochs": 5, "compare": ["alone"]}
    ray_run = train(tiny(**{"transport.kind": "ray"}, out=str(tmp_path / "ray"), **base), verbose=False)
    one_by_one = train(tiny(**{"run.concurrent": False}, out=str(tmp_path / "seq"), **base), verbose=False)
    together = train(tiny(out=str(tmp_path / "conc"), **base), verbose=False)
    assert whole_rounds(ray_run) == whole_rounds(one_by_one)
    a, b = whole_rounds(ray_run), whole_rounds(together)  # equal here, or different in the last digits
    for x, y in zip(a, b, strict=True):
        assert x["metrics"] == y["metrics"]
        for key in ("train_loss", "eta", "weights", "coefficients"):
            if key in x:
                assert np.allclose(x[key], y[key], rtol=1e-5, atol=0), key


def test_sigterm_under_ray_ends_with_the_resume_line(ray_cluster, tmp_path):
    """ray.init replaces SIGTERM's handler with an immediate exit; the run keeps its own (exit 143, one line)."""
    from tests.helpers import sigterm_after_first_checkpoint

    address = ray_cluster.get_runtime_context().gcs_address
    args = ["--run.rounds", "400", "--compare", "--quiet", "--data.organizations", "3", "--transport.kind", "ray",
            "--transport.address", address]  # fmt: skip
    code, err, records = sigterm_after_first_checkpoint(args, tmp_path / "run")
    lines = [line for line in err.splitlines() if "terminated" in line or "Traceback" in line]
    assert code == 143, err
    assert len(lines) == 1 and "terminated after round" in lines[0] and "--resume" in lines[0], err
    assert records == int(lines[0].split("after round ")[1].split(" ")[0]) + 1


def test_a_run_stopped_in_one_process_resumes_under_ray_and_ends_as_uninterrupted(tiny, tmp_path):
    """Where parties run is not part of a run's identity: the data check compares like with like (the coordinator
    holds every party's data in one process, only Alice's labels under ray) and lets the switch through."""
    from vcl.coordinator.runner import RunInterrupted

    base = {"data.organizations": 3, "run.rounds": 3, "learner.epochs": 5, "run.concurrent": False}
    whole = train(tiny(out=str(tmp_path / "whole"), **base), verbose=False)
    cut = tiny(out=str(tmp_path / "cut"), **base)
    with pytest.raises(RunInterrupted):
        train(cut, verbose=False, callbacks=[RoundCheckpoint(), Stop(1)])
    resumed = train(tiny(out=str(tmp_path / "cut"), **{"transport.kind": "ray"}, **base), resume=True, verbose=False)
    assert whole_rounds(resumed) == whole_rounds(whole) and resumed["value"] == whole["value"]


def test_a_users_lightning_module_trains_in_each_partys_own_process(tiny):
    """learner.model naming the user's LightningModule: every party's process imports and builds it from the
    config, and the run equals the local sequential one in every figure; under engine trainer each party's
    Trainer writes its TensorBoard log in that party's own folder."""
    user = {"learner.model": [{"class_path": "tests.lightning_user.Net"}], "learner.epochs": 10, "run.rounds": 2}
    ray_run = train(tiny(**user, **{"transport.kind": "ray"}), verbose=False, write=False)
    local = train(tiny(**user, **{"run.concurrent": False}), verbose=False, write=False)
    assert rounds_of(ray_run) == rounds_of(local)
    config = tiny(**user, **{"transport.kind": "ray", "run.engine": "trainer"})
    train(config, verbose=False)
    assert list((config.run_dir / "parties" / "org2" / "tensorboard" / "round-2").glob("events.out.tfevents.*"))


def test_a_users_data_module_is_built_in_each_partys_process(tiny):
    """data.module under ray: the coordinator checks the user's module and keeps no feature; each party's process
    builds it and keeps its own view; the rounds equal the local sequential run's."""
    own = {"data.module": {"class_path": "tests.lightning_user.SignalWithBob"}, "run.rounds": 2, "learner.epochs": 5}
    ray_run = train(tiny(**own, **{"transport.kind": "ray"}), verbose=False, write=False)
    local = train(tiny(**own, **{"run.concurrent": False}), verbose=False, write=False)
    assert rounds_of(ray_run) == rounds_of(local) and ray_run["organizations"] == ["alice", "bob"]


def test_a_broadcast_crosses_the_driver_once_and_arrives_whole(ray_cluster):
    import torch

    from vcl.methods.messages import PseudoResidual
    from vcl.transports.ray import _fetched, _stored_once

    shared, own = torch.randn(50, 3), torch.randn(50, 3)
    messages = [PseudoResidual("alice", n, 1, shared) for n in ("bob", "carol")]
    messages.append(PseudoResidual("alice", "dave", 1, own))
    stored = _stored_once(messages)
    assert isinstance(stored[0].values, ray_cluster.ObjectRef) and stored[0].values == stored[1].values
    assert stored[2] is messages[2]  # a tensor only one message carries goes with its message, as before
    arrived = _fetched(stored[1])
    assert arrived.receiver == "carol" and torch.equal(arrived.values, shared) and _fetched(stored[2]) is stored[2]


def test_a_cluster_of_two_nodes_runs_each_organization_on_its_node_as_the_local_run(tmp_path, signal_csvs):
    """The docs' "Across machines" recipe on a Ray cluster of two nodes (tests/ray_nodes.py): each organization's
    actor runs on the node of its resource, for training and for a prediction of the finished run, and every
    round's figures, the bytes and the predictions equal the local run's."""
    import csv
    import json
    import subprocess

    import train as cli

    new = []
    for path in signal_csvs:  # new people: the first 30 rows of each file (bob's come in another order)
        lines = Path(path).read_text().splitlines()
        target = tmp_path / f"new_{Path(path).name}"
        target.write_text("\n".join(lines[:31]) + "\n")
        new.append(str(target))
    out = tmp_path / "cluster"
    script = Path(__file__).with_name("ray_nodes.py")
    done = subprocess.run([sys.executable, str(script), str(out), *signal_csvs, *new], capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    placed = json.loads(done.stdout.strip().splitlines()[-1])
    nodes = {p["name"]: p["node"] for p in placed["parties"]}
    assert nodes == {"alice": placed["nodes"]["node_alice"], "bob": placed["nodes"]["node_bob"]}
    assert placed["nodes"]["node_alice"] != placed["nodes"]["node_bob"]
    local = tmp_path / "local"
    common = ["--data.dataset", "csv", "--data.task", "classification", "--run.rounds", "3", "--quiet"]
    assert cli.main([*common, "--data.csv_files", *signal_csvs, "--out", str(local), "--run.concurrent", "false"]) == 0
    assert cli.main(["predict", "--out", str(local), "--data.csv_files", *new, "--predictions",
                     str(local / "predictions.csv"), "--quiet"]) == 0  # fmt: skip
    apart, here = (json.loads((d / "results.json").read_text()) for d in (out, local))
    assert rounds_of(apart) == rounds_of(here) and apart["bytes_sent"] == here["bytes_sent"]
    rows = [list(csv.DictReader((d / "predictions.csv").open())) for d in (out, local)]
    shared = set.intersection(*({line.split(",")[0] for line in Path(f).read_text().splitlines()[1:]} for f in new))
    assert [r["id"] for r in rows[0]] == [r["id"] for r in rows[1]] and {r["id"] for r in rows[0]} == shared
    for a, b in zip(*rows, strict=True):
        assert a["prediction"] == b["prediction"]
        assert all(abs(float(a[k]) - float(b[k])) < 1e-6 for k in a if k.startswith("p_"))
