"""The results page is what the kept benchmark records give (no figure on it is copied by hand)."""

from tests.helpers import benchmark

results = benchmark("results")


def test_results_page_regenerates_from_the_records():
    assert results.main(["--check"]) == 0


def test_every_record_file_is_named_with_the_command_that_wrote_it():
    folders = [p for p in results.RECORDS.iterdir() if p.is_dir()]
    assert folders
    for folder in folders:
        files = {p.name for p in folder.iterdir() if p.suffix in (".json", ".jsonl")}
        assert files == set(results.commands(folder)), folder.name


def test_a_page_edited_by_hand_fails_the_check(tmp_path, monkeypatch):
    page = tmp_path / "results.md"
    page.write_text(results.page().replace("19 passed", "20 passed"))
    monkeypatch.setattr(results, "PAGE", page)
    assert results.main(["--check"]) == 1
