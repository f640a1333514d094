"""benchmarks/authors_gal.py: how it changes the GAL authors' code and reads what it prints (their code is not
run here: the benchmark needs a checkout of it)."""

import pytest

from tests.helpers import benchmark

ag = benchmark("authors_gal")

ASSIST = f"""        if 'train' in organization_outputs[0]:
            if cfg['assist_rate_mode'] == 'search':
{ag.ETA_LINE}            else:
"""
DATA = f"    DataLoader(dataset=dataset[k], collate_fn=input_collate,\n        {ag.RESEED})\n"


def apply(variant: str) -> dict[str, str]:
    files = {"assist.py": ASSIST, "data.py": DATA}
    for name, old, new in ag.changes(variant):
        files[name] = ag.patched(files[name], old, new, name)
    return files


def test_each_variant_changes_only_what_it_names_and_every_one_prints_eta():
    published = apply("published")
    assert published["data.py"] == DATA and "min(abs(model.assist_rate.item()), 300)" in published["assist.py"]
    signed = apply("signed_eta")
    assert "min(abs(" not in signed["assist.py"] and signed["data.py"] == DATA
    fresh = apply("fresh_noise")
    assert "np.random.seed" not in fresh["data.py"] and "worker_init_fn=None" in fresh["data.py"]
    both = apply("fresh_noise+signed_eta")
    assert both["data.py"] == fresh["data.py"] and both["assist.py"] == signed["assist.py"]
    assert all(f["assist.py"].count("VCL_ETA") == 1 for f in (published, signed, fresh, both))


def test_a_change_whose_text_is_not_there_once_stops_the_benchmark_with_a_sentence():
    with pytest.raises(SystemExit, match="occurs 0 times.*commit b335edc"):
        ag.patched("other code", ag.RESEED, "worker_init_fn=None", "src/data.py")
    with pytest.raises(SystemExit, match="occurs 2 times"):
        ag.patched(DATA * 2, ag.RESEED, "worker_init_fn=None", "src/data.py")


def test_the_output_gives_each_rounds_accuracy_and_eta():
    text = (
        "Model: 0_Blob  Test Epoch: 0(100%)  Loss: 2.4482  Accuracy: 5.0000\n"
        "Train Local Epoch: 1(1%)  Loss: 3.1\rTrain Local Epoch: 2(2%)  Loss: 3.0\n"
        "VCL_ETA 1 4.48\nModel: 0_Blob  Test Epoch: 1(100%)  Loss: 0.76  Accuracy: 85.0000\n"
        "VCL_ETA 2 -0.31\nModel: 0_Blob  Test Epoch: 2(100%)  Loss: 294.6  Accuracy: 0.0000\n"
    )
    accuracy, eta = ag.parse_output(text)
    assert accuracy == [0.05, 0.85, 0.0] and eta == [4.48, -0.31]
    with pytest.raises(ValueError, match="every round"):
        ag.parse_output(text.replace("Test Epoch: 1(100%)", "Test Epoch: 5(100%)"))


def test_report_counts_the_negative_line_searches_beside_the_papers_figure():
    rec = dict(dataset="blob", organizations=2, control="c", variant="published", split_seed=0, table="15", paper=66.3)
    records = [
        {**rec, "seed": 0, "value": 0.2, "best_value": 0.4, "eta": [4.0, -1.0]},
        {**rec, "seed": 1, "value": 0.3, "best_value": 0.6, "eta": [2.0, -300.5]},
    ]
    row = ag.report(records).splitlines()[-1]
    assert "| 25.0 | 50.0 (66.3, Table 15) | 2 of 4 | 300 | 2 |" in row
    records[1]["split_seed"] = 1  # two splits: a row each and one over both
    rows = ag.report(records).splitlines()[2:]
    assert len(rows) == 3 and "| all | 25.0 | 50.0 (66.3" in rows[-1] and "| 1 | 30.0 | 60.0 (66.3" in rows[1]


def test_a_folder_without_the_authors_script_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        ag.parse_args(["--reference", str(tmp_path)])
    assert stop.value.code == 2 and "give a checkout of the GAL authors' code" in capsys.readouterr().err
