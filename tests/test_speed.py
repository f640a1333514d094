"""benchmarks/speed.py: its ratios from records, its refusal of a wrong checkout, a failing command named."""

import subprocess
import sys

import pytest

from tests.helpers import BENCHMARKS, benchmark

speed = benchmark("speed")


def test_report_gives_medians_and_both_ratios_against_their_targets():
    runs = {"import_torch": [2.0, 2.2, 2.1], "vcl_default": [4.0, 4.4, 4.2], "vcl_gal": [3.0, 3.0, 3.0]}
    runs["authors"] = [40.0, 42.0, 41.0]
    records = [{"command": k, "seconds": s} for k, v in runs.items() for s in v]
    text = speed.report(records)
    assert "| vcl_default | 4.20 | 3 |" in text
    assert "| vcl_default / import_torch | 2.00× | ≤ 1.8× (not met) |" in text
    assert "| authors / vcl_gal | 13.67× | ≥ 12× (met) |" in text


def test_a_checkout_without_the_authors_script_is_refused_before_work(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "speed.py"), "--reference", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "no src/train_model_assist.py there" in proc.stderr


def test_a_failing_command_stops_the_benchmark_with_its_error(tmp_path):
    with pytest.raises(SystemExit, match="failed \\(exit 3\\): boom"):
        speed.timed([sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], tmp_path, {})


def test_the_authors_job_runs_in_their_src_with_old_pickles_allowed(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train_model_assist.py").write_text("")
    cmds = speed.commands(speed.parse_args(["--reference", str(tmp_path)]), "/tmp/x")
    argv, cwd, env = cmds["authors"]
    assert cwd == tmp_path / "src" and argv[1:4] == ["train_model_assist.py", "--data_name", "Wine"]
    assert env == {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"} and "8_stack_100_10_search_0" in argv
    assert "--compare" in cmds["vcl_gal"][0] and "--compare" not in cmds["vcl_default"][0]


HEAVY = ("torchvision", "matplotlib", "pytorch_lightning", "lightning_fabric", "torchmetrics", "sklearn", "scipy",
         "torch._dynamo")  # fmt: skip


def test_a_tabular_gal_run_imports_nothing_it_does_not_use(tmp_path):
    """Start-up (issue: whole-process time near torch's own import): the command line and a tabular GAL round
    (wine, organizations fitted together, Alone beside it, TensorBoard logs, checkpoints) import none of the
    heavy packages that other paths need: Lightning (engine: trainer), torchvision (images), scikit-learn and
    SciPy (DC analysis, tree learners), matplotlib (benchmark plots), TorchDynamo (torch.optim's first use)."""
    root = BENCHMARKS.parent
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['train.py', '--quiet', '--run.rounds', '1', '--out', {str(tmp_path / 'run')!r}]\n"
        "try:\n"
        f"    runpy.run_path({str(root / 'train.py')!r}, run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "run" / "results.json").is_file()
