"""benchmarks/scaling.py: its tables from records (the M = 64 / M = 8 growth, equal results), and one tiny run."""

import json
import subprocess
import sys

import pytest

from tests.helpers import BENCHMARKS, benchmark

scaling = benchmark("scaling")


def _record(sweep, ds, m, rows, concurrent, seconds, value=0.9, first=None):
    rounds = [first or seconds, seconds, seconds]  # the median round is `seconds`; the first may be slower
    return dict(
        sweep=sweep, dataset=ds, organizations=m, rows=rows, concurrent=concurrent, seconds_per_round=seconds,
        round_seconds=rounds, value=value, transport="local", device="cpu",
    )  # fmt: skip


def test_report_gives_the_growth_from_8_to_64_organizations_and_whether_results_agree():
    records = [
        _record("organizations", "digits", 8, 1437, True, 1.0),
        _record("organizations", "digits", 64, 1437, True, 1.5, first=3.0),
        _record("organizations", "digits", 8, 1437, False, 2.0),
        _record("organizations", "digits", 64, 1437, False, 9.0, value=0.8),
        _record("rows", "wide", 8, 10_000, True, 0.5),
        _record("rows", "wide", 8, 10_000, False, 1.0),
    ]
    text = scaling.report(records)
    # the target on the median round; beside it the mean rounds' ratio, here raised by a slow first round at M = 64
    assert "| digits | concurrent | 1.000 | 1.500 | 1.50× | met | 2.00× | — |" in text
    assert "| digits | sequential | 2.000 | 9.000 | 4.50× | not met | 4.50× | — |" in text
    assert "| digits | 64 | 1,437 | 1.500 | 9.000 | 6.00× | no |" in text  # the two fits disagree: it says so
    assert "| wide | 8 | 10,000 | 0.500 | 1.000 | 2.00× | yes |" in text
    assert "each run's median round" in text and "in turn" not in text
    stepped = [dict(r, interleaved=r["sweep"] == "organizations") for r in records]
    text = scaling.report(stepped)
    assert "sizes stepped a round at a time in turn in one process" in text
    assert "| digits | concurrent | 1.000 | 1.500 | 1.50× | met | 2.00× | 1.50-1.50× (1) |" in text
    # pairs of runs stepped side by side: each seed's M = 64 over its M = 8, here 1.5 / 1.0 and 2.0 / 0.5
    seed1 = [
        dict(_record("organizations", "digits", m, 1437, True, s), seed=1, interleaved=True)
        for m, s in ((8, 0.5), (64, 2.0))
    ]
    line = "| digits | concurrent | 0.750 | 1.750 | 2.33× | not met | 2.67× | 1.50-4.00× (2) |"
    assert line in scaling.report(stepped + seed1)
    # a second repeat of a config: its times count in the medians; a value that moved between repeats is "no"
    again = [dict(r, repeat=1, seconds_per_round=3.0) for r in records[:2]]
    text = scaling.report(records + again)
    assert "median over seeds and repeats" in text and "median over seeds;" in scaling.report(records)
    assert "| digits | concurrent | 2.000 | 2.250 | 1.12× | met | 2.00× | — |" in text  # medians of (1, 3) and (1.5, 3)
    assert "| digits | 8 | 1,437 | 2.000 | 2.000 | 1.00× | yes |" in text
    moved = dict(records[0], repeat=1, value=0.5)
    assert "| digits | 8 | 1,437 | 1.000 | 2.000 | 2.00× | no |" in scaling.report(records + [moved])
    older = [{k: v for k, v in r.items() if k != "round_seconds"} for r in records]  # their s/round: the mean
    assert "each run's mean round" in scaling.report(older)


@pytest.mark.slow
def test_a_tiny_sweep_writes_records_a_plot_and_equal_results(tmp_path, monkeypatch):
    sweeps = [("organizations", "digits", 2, 1000), ("organizations", "digits", 4, 1000), ("rows", "digits", 2, 1000)]
    monkeypatch.setattr(scaling, "sweeps", lambda quick: sweeps)
    argv = ["--rounds", "1", "--epochs", "1", "--seeds", "0", "--repeats", "2", "--out", str(tmp_path / "s.json")]
    monkeypatch.setattr(sys, "argv", ["scaling.py", *argv])
    scaling.main()
    records = json.loads((tmp_path / "s.json").read_text())
    # the organizations sweep twice, each time its concurrent and its sequential runs stepped in turn; the rows
    # sweep once, its runs one after another
    runs = [(r["sweep"], r["organizations"], r["repeat"], r["concurrent"], r["interleaved"]) for r in records]
    assert runs == [
        ("organizations", m, repeat, concurrent, True)
        for repeat in (0, 1)
        for concurrent in (True, False)
        for m in (2, 4)
    ] + [("rows", 2, 0, True, False), ("rows", 2, 0, False, False)]
    for m in (2, 4):  # every run of a config gives one result, concurrent or sequential, in either repeat
        assert len({r["value"] for r in records if r["organizations"] == m and r["sweep"] == "organizations"}) == 1
    assert all(r["seconds_per_round"] > 0 for r in records)
    assert all(r["seconds_per_round"] == r["round_seconds"][0] for r in records)  # one round: its seconds
    assert (tmp_path / "s.png").stat().st_size > 0


def test_no_repeats_is_refused_before_any_run(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["scaling.py", "--repeats", "0"])
    monkeypatch.setattr(scaling, "run_all", lambda jobs, args: pytest.fail("a run started"))
    with pytest.raises(SystemExit) as exit_:
        scaling.main()
    assert exit_.value.code == 2 and "--repeats 0: give at least 1." in capsys.readouterr().err


def test_help_runs_without_starting_work():
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "scaling.py"), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "organizations" in proc.stdout
