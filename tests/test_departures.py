"""design.md's list of departures from the papers is complete and current. The benchmarks declare theirs beside the
settings that make them (``benchmarks/departures.py``: each experiment's settings as the paper states them, the
config of its runs, a departure for each setting that differs); design.md's list of them is built from those
declarations; every other departure a method page states carries a marker, ``departure: <key>`` (an HTML comment),
and the same marker stands on an item of design.md's list, so the list cannot fall behind the pages."""

import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import benchmark

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"departure: ([a-z0-9][a-z0-9-]*[a-z0-9])")
HEAD = "**Where we depart from the paper**"
departures = benchmark("departures")
EXPERIMENTS = departures.declared()
DEPARTURES = {d.key: d for e in EXPERIMENTS for d in e.departures}


def listed() -> list[str]:
    """The markers on design.md's list: from its heading to the first line that is not a list item or its text."""
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index(HEAD)
    end = re.search(r"\n\n(?![-\s])", text[start + len(HEAD) :])  # the list's items are indented or start with "-"
    section = text[start : start + len(HEAD) + (end.start() if end else len(text))]
    return MARK.findall(section)


def stated() -> dict[str, set[str]]:
    """Each marker of the method pages, and each departure a benchmark declares, with where it is said."""
    out: dict[str, set[str]] = {}
    for path in (p for p in (ROOT / "docs").glob("*.md") if p.name not in ("design.md", "results.md")):
        for key in MARK.findall(path.read_text()):
            out.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    for e in EXPERIMENTS:
        for d in e.departures:
            out.setdefault(d.key, set()).add(e.command.split()[0])
    return out


def test_every_departure_a_page_or_benchmark_states_is_in_design_mds_list():
    keys = listed()
    assert len(keys) == len(set(keys)), f"a departure listed twice: {sorted(k for k in keys if keys.count(k) > 1)}"
    missing = {key: sorted(where) for key, where in stated().items() if key not in keys}
    assert not missing, f"departures stated but not in design.md's list (add an item with its marker): {missing}"


def test_every_marked_item_of_the_list_is_stated_where_it_comes_from():
    orphans = sorted(set(listed()) - set(stated()))
    assert not orphans, f"design.md lists these departures but no page or benchmark states them: {orphans}"


def test_design_mds_list_of_the_benchmarks_departures_is_what_they_declare():
    assert departures.main(["--check"]) == 0, "run: python benchmarks/departures.py --write"


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda e: f"{e.command} {e.where}")
def test_a_benchmark_setting_differs_from_the_papers_only_where_a_departure_says_so(experiment):
    assert "data.dataset" in experiment.stated and experiment.runs
    assert not departures.undeclared(experiment), f"undeclared: {departures.undeclared(experiment)}"
    assert not departures.stale(experiment), f"departures naming settings that agree: {departures.stale(experiment)}"


def test_each_declared_departure_is_said_on_its_method_page():
    unsaid = {k: d.page for k, d in DEPARTURES.items() if k not in MARK.findall((ROOT / "docs" / d.page).read_text())}
    assert not unsaid, f"declared departures their pages do not mark: {unsaid}"


def test_a_changed_setting_fails_until_it_is_declared():
    """The full image mode runs the paper's settings; one run at 3 epochs makes it differ, which the test finds,
    and a departure naming the epochs declares it; the quick mode's departure names the rounds, which at 10 agree."""
    full = next(e for e in EXPERIMENTS if e.command == "benchmarks/gal_images.py")
    assert departures.undeclared(full) == []
    changed = replace(full, runs=[*full.runs[:-1], {**full.runs[-1].to_dict(), "learner": {"epochs": 3}}])
    assert departures.undeclared(changed) == ["learner.epochs"]
    said = departures.Departure("t", "gal.md", "fewer epochs", ("learner.epochs",))
    assert departures.undeclared(replace(changed, departures=(said,))) == []
    quick = next(e for e in EXPERIMENTS if e.command == "benchmarks/gal_images.py --quick")
    ten = [{**r.to_dict(), "run": {**r.to_dict()["run"], "rounds": 10}} for r in quick.runs]
    assert departures.stale(replace(quick, runs=ten)) == ["gal-images-quick: run.rounds"]


def test_the_marker_is_found_where_it_is_written(tmp_path):
    assert MARK.findall("text <!-- departure: gal-fig4-settings --> more") == ["gal-fig4-settings"]
    assert MARK.findall("# departure: dc-fig3-grid") == ["dc-fig3-grid"]
    assert MARK.findall("departure: -bad") == []
