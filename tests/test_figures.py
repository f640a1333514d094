"""The pictures: the papers' figures drawn from kept records only, and a finished run's own curves."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import benchmark

figures = benchmark("figures")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """Every catalogued picture drawn once by ``figures.py --quick`` (its folder, and each picture's matplotlib
    figure as saved, by name), for the tests that look at them from two sides."""
    from matplotlib.figure import Figure as Canvas

    out, drawn = tmp_path_factory.mktemp("figures"), {}
    save = Canvas.savefig

    def kept(self, path, *args, **kwargs):
        drawn[Path(path).name.removeprefix(".").removesuffix(".tmp.png")] = self  # figures.draw's temporary file
        return save(self, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Canvas, "savefig", kept)
        assert figures.main(["--quick", "--out", str(out)]) == 0
    return out, drawn


def test_every_figure_is_drawn_from_a_kept_record_named_with_its_command(quick, tmp_path):
    out, _ = quick
    for figure in figures.catalogue():
        png, caption = out / f"{figure.name}.png", (out / f"{figure.name}.md").read_text()
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000, figure.name
        assert f"(../records/{figure.record})" in caption and f"`{figure.command()}`" in caption
        assert figure.command().startswith("python") or "python benchmarks/" in figure.command()
    assert figures.main(["--only", "no_such_figure", "--out", str(tmp_path)]) == 2


def test_the_docs_show_every_figure_and_every_picture_they_show_is_drawn():
    drawn = {f.name: f for f in figures.catalogue()}
    shown = set()
    for page in (ROOT / "docs").glob("*.md"):
        for name in re.findall(r"!\[[^\]]*\]\(figures/([\w.]+)\.png\)", page.read_text()):  # embedded pictures
            assert name in drawn, f"{page.name} shows figures/{name}.png, which benchmarks/figures.py does not draw"
            assert drawn[name].where == page.name, f"{name} is shown in {page.name}, listed for {drawn[name].where}"
            shown.add(name)
    assert shown == set(drawn)
    for name in drawn:  # kept in the repository, redrawn by the command in its caption
        assert (ROOT / "docs" / "figures" / f"{name}.png").is_file() and (
            ROOT / "docs/figures" / f"{name}.md"
        ).is_file()


def test_gal_table14_rows_put_al_on_the_organizations_sum_and_gal_on_the_slowest():
    record = {"organizations": 2, "stored_parameters": 10, "bytes_sent": 40, "round_seconds": [1.0, 1.0],
              "fit_seconds_per_round": [[1.0, 3.0], [1.0, 3.0]], "alice_seconds_per_round": [0.5, 0.5],
              "exchanges_per_round": [1, 1], "concurrent": False}  # fmt: skip
    rows = figures.load("gal_images").complexity_rows(
        [{**record, "method": "gal"}, {**record, "method": "al", "exchanges_per_round": [2, 2]}]
    )
    by = {r["method"]: r for r in rows}
    assert by["gal"]["path_seconds"] == 3.5 and by["al"]["path_seconds"] == 4.5 and by["al"]["exchanges"] == 2
    assert by["gal"]["bytes_per_round"] == 20


def test_a_finished_run_draws_its_own_curves(tiny, tmp_path):
    from vcl.coordinator.runner import train
    from vcl.use.figures import MARK

    out = tmp_path / "run"
    train(tiny(**{"run.rounds": 2, "out": str(out), "compare": ["alone"]}), verbose=False)
    command = [sys.executable, str(ROOT / "train.py"), "figures", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    probe = (  # the second time it replaces the picture it wrote, and a picture needs neither torch nor Lightning
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import train; "
        f"print(train.main(['figures', '--out', {str(out)!r}]), 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.split()[-2:] == ["0", "False"], done.stdout + done.stderr
    png = out / "figures" / "rounds.png"
    assert MARK in png.read_bytes()[:4096]
    foreign = tmp_path / "mine.png"
    foreign.write_bytes(b"\x89PNG\r\n\x1a\n not this command's")
    for args, words in ((["--png", str(foreign)], "did not write"), (["--out", str(tmp_path / "none")], "no results")):
        done = subprocess.run(command[:3] + ["--out", str(out)] + args, capture_output=True, text=True)
        assert done.returncode == 2 and words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert foreign.read_bytes().endswith(b"not this command's")


CODE_NAMES = {"gal", "al", "al_authors", "gal_constant", "gal_bag", "gal_dms", "alone", "joint", "interm", "late",
              "ascii[exact]", "ascii[paper]", "ascii_random[exact]", "ascii_simple", "ensemble_adaboost", "single",
              "oracle", "joint_t", "dual_t", "mpdl_a", "ftl_a", "dc_smote", "dc_rand", "dc_tsvd"}  # fmt: skip


def test_every_picture_labels_its_axes_and_names_methods_as_the_papers_do(quick):
    """Each catalogued picture, as drawn: every panel with a value axis says what it measures (a y-axis label), and
    no legend names a method by vcl's code name alone."""
    _, drawn = quick
    unlabelled, coded = [], []
    for figure in figures.catalogue():
        canvas = drawn[figure.name]
        for ax in canvas.axes:
            if ax.images or ax.name == "3d" or not ax.get_visible():
                continue  # a picture of data (images, 3-D scatter) has no value axis
            if any(t.get_visible() and t.get_text() for t in ax.get_yticklabels()) and not ax.get_ylabel():
                unlabelled.append(f"{figure.name}: {ax.get_title()!r}")
            legend = ax.get_legend()
            names = [t.get_text() for t in legend.get_texts()] if legend else []
            coded += [f"{figure.name}: {n}" for n in names if n in CODE_NAMES]
        for legend in canvas.legends:
            coded += [f"{figure.name}: {t.get_text()}" for t in legend.get_texts() if t.get_text() in CODE_NAMES]
    assert not unlabelled, f"panels with no y-axis label: {unlabelled}"
    assert not coded, f"legends in vcl's code names: {coded}"


def test_no_text_of_a_picture_runs_off_its_canvas(quick):
    """Everything drawn on every catalogued picture (titles, labels, tick labels, legends, annotations) lies inside
    the picture as saved: a suptitle wider than the canvas is cut off in the PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    _, drawn = quick
    assert drawn
    off = []
    for name, canvas in drawn.items():
        FigureCanvasAgg(canvas).draw()  # laid out as saved
        renderer, box = canvas.canvas.get_renderer(), canvas.bbox
        ink = canvas.get_tightbbox(renderer).transformed(canvas.dpi_scale_trans)  # what was drawn, in pixels
        if ink.x0 < box.x0 - 1 or ink.y0 < box.y0 - 1 or ink.x1 > box.x1 + 1 or ink.y1 > box.y1 + 1:
            texts = [t for t in canvas.findobj(Text) if t.get_visible() and t.get_text().strip()]
            wide = [t.get_text()[:50] for t in texts if not box.contains(*t.get_window_extent(renderer).p1)]
            off.append(f"{name}: drawn over {ink.bounds} on a canvas of {box.bounds} ({wide[:3]})")
    assert off == [], off
