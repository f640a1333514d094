"""vcl.coordinator.sweep.Interleaved: runs stepped a round at a time in turn give the records they give run alone."""

import pytest

from vcl.coordinator.sweep import Interleaved, Job
from vcl.methods.gal.coordinator import GradientAssistedLearning


def _timeless(record):
    return {k: v for k, v in record.items() if "seconds" not in k}


def test_interleaved_runs_take_turns_and_give_the_records_of_runs_alone(tiny, monkeypatch):
    runs = [(2, 3, True), (4, 3, True), (3, 2, False)]  # organizations, rounds, fitted concurrently
    # interleaved runs write no files, so nothing they kept is attacked: the runs alone skip the audit too
    configs = [tiny(**{"data.organizations": m, "run.rounds": t, "run.concurrent": c, "run.audit": False})
               for m, t, c in runs]  # fmt: skip
    jobs = [Job("t", cfg, "gal", "linear", None, {"k": i}) for i, cfg in enumerate(configs)]
    alone = [job() for job in jobs]
    turns, run_round = [], GradientAssistedLearning.run_round

    def logged(self):
        turns.append(len(self.federation.names))  # which run takes its turn: its number of organizations
        return run_round(self)

    monkeypatch.setattr(GradientAssistedLearning, "run_round", logged)
    together = Interleaved(jobs)()
    # round 1 in the order given, round 2 reversed, round 3 in order: the third run stopped after its 2 rounds
    assert turns == [2, 4, 3, 3, 4, 2, 2, 4]
    assert [_timeless(r) for r in together] == [_timeless(r) for r in alone]
    assert [len(r["round_seconds"]) for r in together] == [3, 3, 2]
    assert all(r["seconds"] >= sum(r["round_seconds"]) > 0 for r in together)


def test_interleaved_refuses_a_config_that_compares_other_methods(tiny):
    job = Job("t", tiny(**{"compare": ["alone"], "run.rounds": 1}), "gal", "linear")
    with pytest.raises(ValueError, match="compares others"):
        Interleaved([job])()
