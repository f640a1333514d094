"""design.md's list of departures from the papers is complete: every departure a method page or a benchmark states
carries a marker, ``departure: <key>`` (an HTML comment on a page, a comment or docstring line in a benchmark), and
the same marker stands on an item of the list, so the list cannot fall behind the pages."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = re.compile(r"departure: ([a-z0-9][a-z0-9-]*[a-z0-9])")
HEAD = "**Where we depart from the paper**"


def listed() -> list[str]:
    """The markers on design.md's list: from its heading to the first line that is not a list item or its text."""
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index(HEAD)
    end = re.search(r"\n\n(?![-\s])", text[start + len(HEAD) :])  # the list's items are indented or start with "-"
    section = text[start : start + len(HEAD) + (end.start() if end else len(text))]
    return MARK.findall(section)


def stated() -> dict[str, set[str]]:
    """Each marker of the method pages and benchmarks, with the files that state it."""
    out: dict[str, set[str]] = {}
    pages = [p for p in (ROOT / "docs").glob("*.md") if p.name not in ("design.md", "results.md")]
    for path in [*pages, *(ROOT / "benchmarks").glob("*.py")]:
        for key in MARK.findall(path.read_text()):
            out.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    return out


def test_every_departure_a_page_or_benchmark_states_is_in_design_mds_list():
    keys = listed()
    assert len(keys) == len(set(keys)), f"a departure listed twice: {sorted(k for k in keys if keys.count(k) > 1)}"
    missing = {key: sorted(where) for key, where in stated().items() if key not in keys}
    assert not missing, f"departures stated but not in design.md's list (add an item with its marker): {missing}"


def test_every_marked_item_of_the_list_is_stated_where_it_comes_from():
    orphans = sorted(set(listed()) - set(stated()))
    assert not orphans, f"design.md lists these departures but no page or benchmark states them: {orphans}"


def test_the_marker_is_found_where_it_is_written(tmp_path):
    assert MARK.findall("text <!-- departure: gal-fig4-settings --> more") == ["gal-fig4-settings"]
    assert MARK.findall("# departure: dc-fig3-grid") == ["dc-fig3-grid"]
    assert MARK.findall("departure: -bad") == []
