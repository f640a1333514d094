"""benchmarks/checkouts.py: its table from records (medians per commit, the newer over the older), and its one
sentence for a checkout it cannot run."""

import pytest

from tests.helpers import benchmark

checkouts = benchmark("checkouts")


def _run(commit, pair, gal, alone, wall):
    return dict(benchmark="checkouts", checkout=f"/tmp/{commit}", commit=commit, rows=10, pair=pair,
                wall_seconds=wall, gal_round_1=gal[0], gal_round_2=gal[1], alone_round_1=alone[0],
                alone_round_2=alone[1], accuracy=0.85)  # fmt: skip


def test_report_gives_each_commits_medians_and_the_ratio():
    records = [
        _run("old", 1, (1.0, 3.0), (1.0, 1.0), 10.0),
        _run("new", 1, (2.0, 2.5), (1.5, 1.5), 12.0),
        _run("new", 2, (3.0, 9.0), (2.0, 2.0), 14.0),
        _run("old", 2, (2.0, 2.0), (1.0, 1.0), 11.0),
    ]
    text = checkouts.report(records)
    assert "| old | 2 | 2.00 | 1.00 | 10.5 | 0.8500 |" in text
    assert "| new | 2 | 2.75 | 1.75 | 13.0 | 0.8500 |" in text
    assert "new over old: GAL round 1.38×, Alone round 1.75×, whole run 1.24×" in text


def test_a_checkout_without_its_links_is_one_sentence_and_exit_2(tmp_path, capsys):
    (tmp_path / "train.py").write_text("")
    with pytest.raises(SystemExit) as end:
        checkouts.checked(str(tmp_path))
    assert end.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "vcl/models" in err and "git worktree add" in err
