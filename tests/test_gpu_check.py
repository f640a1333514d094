"""benchmarks/gpu_check.py on a machine without CUDA: it says so and exits 0; its summary reads its records."""

import os
import subprocess
import sys

import pytest

from tests.helpers import BENCHMARKS as BENCH
from tests.helpers import benchmark

gpu_check = benchmark("gpu_check")


@pytest.mark.slow
def test_without_cuda_it_says_so_and_exits_0(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "gpu_check.py"), "--out", str(out)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0 and "no CUDA device" in proc.stdout
    assert not out.exists()


def test_summary_reports_speed_up_utilization_and_failures():
    gal = dict(
        step="gal_mnist_subset", accuracy=0.9, gpu_utilization_median=80.0, peak_memory_gib=1.5, device_name="GPU X"
    )
    records = [
        {"step": "pytest -m gpu", "summary": "18 passed in 30s", "returncode": 0, "seconds": 30.0},
        {**gal, "concurrent": True, "seconds_per_round": 1.0},
        {**gal, "concurrent": False, "seconds_per_round": 3.0},
        {"step": "gal_mnist_subset", "concurrent": None, "error": "boom"},
    ]
    text = gpu_check.markdown(records, "2026-11-23")
    assert "GPU X" in text and "18 passed" in text and "3.00×" in text and "| concurrent | 1.00 |" in text
    assert "failed: boom" in text
