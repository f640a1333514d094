"""GAL's Figure 4 benchmark: every run it lists is a valid config, and its curves and caption checks come from a
real run's records."""

from tests.helpers import benchmark
from vcl.coordinator.assembly import check_config
from vcl.coordinator.runner import train
from vcl.coordinator.sweep import run_record

fig4 = benchmark("gal_fig4")


def test_every_listed_run_is_a_valid_config():
    for ds in fig4.SETTINGS:
        for label in fig4.METHODS:
            check_config(fig4.config(ds, label, 0))
    assert fig4.config("mnist_subset", "gal_constant", 0).gal.eta == "constant"


def test_curves_and_checks_come_from_the_runs_records(monkeypatch):
    monkeypatch.setattr(fig4, "ROUNDS", 3)
    small = {"data.max_train": 300, "learner.epochs": 1, "learner.cnn_widths": [4, 4, 4, 4]}
    monkeypatch.setitem(fig4.SETTINGS, "mnist_subset", {**fig4.SETTINGS["mnist_subset"], **small})
    records = []
    for label in ("gal", "gal_constant"):
        cfg = fig4.config("mnist_subset", label, 0)
        records.append(run_record("gal_fig4", cfg, label, "cnn", fig4.curves))
    gal, const = records
    assert len(gal["test_curve"]) == len(gal["eta_curve"]) == 4 and gal["eta_curve"][0] is None
    assert all(e == 1.0 for e in const["eta_curve"][1:]) and all(isinstance(e, float) for e in gal["eta_curve"][1:])
    assert all(abs(sum(w) - 1) < 1e-5 for w in gal["weights_curve"][1:])  # on the simplex
    again = train(fig4.config("mnist_subset", "gal", 0), verbose=False, write=False)
    assert gal["test_curve"] == [r["metrics"]["test"] for r in again["rounds"]]
    text = fig4.report(records)
    assert "mnist_subset | 8 | gal_constant" in text and "lower with the line search in" in text
    assert "central patches' share" in text
