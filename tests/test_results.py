"""The results page is what the kept benchmark records give (no figure on it is copied by hand)."""

import json

from tests.helpers import benchmark

results = benchmark("results")


def test_results_page_regenerates_from_the_records():
    assert results.main(["--check"]) == 0


def test_every_record_file_is_named_with_the_command_that_wrote_it():
    folders = [p for p in results.RECORDS.iterdir() if p.is_dir()]
    assert folders
    for folder in folders:
        files = {p.name for p in folder.iterdir() if p.suffix in (".json", ".jsonl") and p.name != "versions.json"}
        assert files == set(results.commands(folder)), folder.name


def test_every_record_folder_names_the_versions_it_ran_with():
    """Each record file of a folder with a versions.json has its entry there (torch and Lightning among them); a
    folder from before the lock says what it knows in its README's line beginning 'Versions:'."""
    for folder in (p for p in results.RECORDS.iterdir() if p.is_dir()):
        said = results.folder_versions(folder)
        assert said and "torch" in said, folder.name
        if (folder / "versions.json").exists():
            held = json.loads((folder / "versions.json").read_text())
            assert set(results.commands(folder)) <= set(held), folder.name
            assert all({"torch", "pytorch-lightning"} <= set(v["packages"]) for v in held.values()), folder.name


def test_a_record_is_written_with_the_versions_it_ran_with(tmp_path):
    """write_records puts the record's entry in its folder's versions.json, keeping the entries of other files."""
    from importlib import metadata

    common = benchmark("common")
    common.write_records([{"value": 1.0}], str(tmp_path / "a.json"))
    common.write_records([{"value": 2.0}], str(tmp_path / "b.json"))
    held = json.loads((tmp_path / "versions.json").read_text())
    assert sorted(held) == ["a.json", "b.json"]
    assert held["a.json"]["packages"]["torch"] == metadata.version("torch")
    assert held["b.json"]["packages"]["pytorch-lightning"] == metadata.version("pytorch-lightning")
    assert "Versions (`a.json`, `b.json`): Python" in results.folder_versions(tmp_path)


def test_a_page_edited_by_hand_fails_the_check(tmp_path, monkeypatch):
    page = tmp_path / "results.md"
    page.write_text(results.page().replace("19 passed", "20 passed"))
    monkeypatch.setattr(results, "PAGE", page)
    assert results.main(["--check"]) == 1


def test_a_docs_figure_in_no_record_fails_the_check():
    """Decimal figures on a docs page resolve against the rendered records (rounding allowed); code, link targets
    and paragraphs marked with the command that measured them are not counted; a marker must name a script."""
    recorded = results.recorded_figures("| wine | 0.9722 | 95.1 (4.2) |")
    assert {"0.9722", "0.972", "0.97", "1.0", "95.1", "4.2"} <= recorded
    page = "\n\n".join(
        [
            "GAL reaches 95.1 % on wine (0.97 of the runs' 0.9722).",
            "Run `train.py --gal.privacy_alpha 2.5` and see [results](results.md#a1.5).",
            "<!-- measured: `python train.py --method ascii` -->\nThe α is 3.132 here.",
        ]
    )
    assert results.unrecorded(page, recorded) == []
    assert [m.rsplit(": ", 1)[1] for m in results.unrecorded("It took 86.5 s, not 95.1.", recorded)] == ["86.5"]
    bad = results.unrecorded("<!-- measured: `by hand` -->\nThe α is 3.132.", recorded)
    assert len(bad) == 1 and "names no script" in bad[0]


def test_a_figure_from_another_record_than_the_one_its_paragraph_links_fails_the_check():
    """A paragraph that links records must take its figures from them: the audit of 2026-11-28 found a sentence
    quoting a record other than the one it named, and a figure mistyped into one that another record holds."""
    page = "\n".join(
        [
            "## Records of one day",
            "### `ascii_quick.json`",
            "| wine | single | 88.9 | 83.3 |",
            "### `mpdl_quick.json`",
            "| breast_cancer | 62.65 |",
            "## Records of another day",
            "### `mpdl_quick.json`",
            "| breast_cancer | 52.90 |",
        ]
    )
    sections, recorded = results.sections_by_anchor(page), results.recorded_figures(page)
    assert {"ascii_quickjson", "mpdl_quickjson", "mpdl_quickjson-1", "records-of-one-day"} <= set(sections)
    right = "Single has 88.9 at round 3 ([ascii_quick.json](results.md#ascii_quickjson))."
    assert results.unrecorded(right, recorded, sections) == []
    planted = [
        "Single has 62.65 at round 3 ([ascii_quick.json](results.md#ascii_quickjson)).",  # another record's figure
        "The inference MAE is 52.90 ([mpdl_quick.json](results.md#mpdl_quickjson)).",  # the other day's record
        "Single has 88.9 ([ascii_quick.json](results.md#ascii_quick)).",  # a link to no record
    ]
    found = [results.unrecorded(text, recorded, sections) for text in planted]
    assert [f[0].rsplit(": ", 1)[1] for f in found] == ["62.65", "52.90", "a link to no record (#ascii_quick)"]
    assert results.unrecorded(planted[0], recorded) == []  # without the sections, any record's figure passes
    whole_day = "The day gave 62.65 and 88.9 ([records](results.md#records-of-one-day))."
    assert results.unrecorded(whole_day, recorded, sections) == []


def test_a_claim_of_agreement_with_the_paper_needs_a_records_figure_beside_it(tmp_path):
    """Claims that slipped (issue 45): "it gives the paper's Late figures" with the records far off, "the paper's
    figures correspond to `paper`" with Fig. 6's ordering reversed. A sentence that says our results agree with
    the paper's must quote a record's figure beside it; one that says they do not needs none."""
    recorded = results.recorded_figures("| boston | 5.1 (0.1) | 8.0 |")
    planted = "\n\n".join(
        [
            "The mean (as the authors' code does; it gives the paper's Late figures) is the default.",
            "Both rules run. **The paper's figures correspond to `paper`**: its Fig. 6 shows them apart.",
        ]
    )
    assert len(results.unsupported_claims(planted, recorded)) == 2
    fine = "\n\n".join(
        [
            "At M = 8 the mean gives the paper's Late figure on Boston (5.1 against 8.0).",
            "Neither variant matches the paper's AL figures.",
            "The paper's DP/IP figures are shown beside both scopes.",
        ]
    )
    assert results.unsupported_claims(fine, recorded) == []
    config = '    """late baseline: mean (as the authors\' code does; it gives the paper\'s\n'
    config += '    Late figures) or sum"""\n'
    path = tmp_path / "groups.py"
    path.write_text("x: int = 1\n" + config)
    assert results.unsupported_claims(results.prose_of(path), recorded)  # the config's texts are read too
