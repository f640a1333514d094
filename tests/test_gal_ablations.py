"""The ablation benchmark's run list covers every transcribed figure of GAL Tables 4–6 and 15–21."""

import pytest

from tests.helpers import benchmark
from vcl.coordinator.assembly import check_config

abl = benchmark("gal_ablations")


def test_full_mode_runs_every_transcribed_tabular_cell():
    runs = set(abl.run_list(quick=False))
    tabular = {k for k in abl.PAPER if k[0] in abl.TABULAR}
    assert tabular and tabular <= runs
    assert len(runs) == len(abl.run_list(quick=False))  # no repeats (Alone is in Tables 4 and 5)
    images = set(abl.run_list(quick=False, datasets=["mnist", "cifar10"]))
    assert {k for k in abl.PAPER if k[0] in ("mnist", "cifar10")} <= images


def test_table_and_dataset_options_narrow_the_run_list():
    runs = abl.run_list(quick=False, tables=[19], datasets=["iris", "wine"])
    assert sorted(runs) == sorted((ds, 2, m, "noninformative") for ds in ("iris", "wine") for m in ("gal", "gal_bag"))
    assert all(m == 8 for _, m, _, _ in abl.run_list(quick=True))


@pytest.mark.slow
def test_every_setting_makes_a_valid_config():
    class Args:
        device, data_root = "cpu", "data"

    for ds, m, method, setting in abl.run_list(quick=False):
        cfg = abl.config(ds, m, method, setting, 0, Args)
        check_config(cfg)
    mixed = abl.config("wine", 8, "gal", "loss=l1+l2", 0, Args)
    assert mixed.gal.local_loss == ["l1"] * 4 + ["l2"] * 4
    assert abl.config("wine", 8, "gal_dp", "scope=all", 0, Args).gal.privacy_scope == "all"
    authors = abl.config("blob", 2, "gal_dp", "authors", 0, Args).gal
    assert (authors.privacy_scope, authors.privacy_draws, authors.eta_cap) == ("all", "repeated", 300.0)
    assert abl.config("wine", 4, "gal_bag", "noninformative", 0, Args).gal.weights == "bag"
