"""benchmarks/speed.py: its ratios from records, its refusal of a wrong checkout, a failing command named."""

import json
import subprocess
import sys

import pytest

from tests.helpers import BENCHMARKS, benchmark

speed = benchmark("speed")


def test_report_gives_medians_and_the_ratios_against_their_targets():
    runs = {"import_torch": [2.0, 2.2, 2.1], "import_lightning": [3.5, 3.5, 3.6], "vcl_default": [4.0, 4.4, 4.2]}
    runs |= {"vcl_gal": [3.0, 3.0, 3.0], "authors": [14.0, 16.0, 15.0]}
    records = [{"command": k, "seconds": s} for k, v in runs.items() for s in v]
    text = speed.report(records)
    assert "| vcl_default | 4.20 | 3 |" in text
    assert "| vcl_default / import_lightning | 1.20× | ≤ 1.6× (met) |" in text
    assert "| vcl_default / import_torch | 2.00× | reference |" in text
    assert "| authors / vcl_gal | 5.00× | ≥ 5× (met) |" in text
    assert "(not met)" in speed.report([*records, *({"command": "vcl_default", "seconds": 9.0} for _ in range(4))])


def test_a_run_writes_its_records_and_a_plot_beside_them(tmp_path, monkeypatch, capsys):
    turns = [2.0, 3.0, 3.9, 0.1, 3.0, 2.5, 2.9, 2.2, 3.2, 4.1, 0.1, 3.3, 2.6, 2.9]
    seconds = iter([9.0] * 7 + turns)  # seven warm-ups, then two turns
    monkeypatch.setattr(speed, "timed", lambda argv, cwd, env: next(seconds))
    speed.main(["--repeats", "2", "--out", str(tmp_path / "speed.json")])
    records = json.loads((tmp_path / "speed.json").read_text())
    names = ["import_torch", "import_lightning", "import_sklearn", "party_import", "vcl_default", "vcl_gal",
             "vcl_default_no_audit"]  # fmt: skip
    assert [(r["command"], r["repeat"], r["seconds"]) for r in records] == [
        (name, repeat, turns[7 * repeat + i]) for repeat in (0, 1) for i, name in enumerate(names)
    ]
    out = capsys.readouterr().out
    assert "| vcl_default / import_lightning | 1.02× | ≤ 1.6× (met) |" in out  # 3.15 / 3.1
    assert "| vcl_default / vcl_default_no_audit | 1.09× | ≤ 1.1× (met) |" in out  # 3.15 / 2.9
    assert (tmp_path / "speed.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


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


@pytest.mark.slow
def test_a_tabular_gal_run_imports_lightning_and_not_scikit_learn(tmp_path):
    """A tabular GAL round (wine, organizations fitted together, Alone beside it, TensorBoard logs, checkpoints)
    is a Lightning run (its learners are LightningModules, its data LightningDataModules) and none of vcl's own
    modules imports the packages only other paths need: scikit-learn (DC analysis, tree learners), but for the audit
    of what the receivers kept, once the rounds are over. A third-party
    package may import it on some machines (one GPU image's did); what counts is which file asked for it."""
    root = BENCHMARKS.parent
    code = (
        "import atexit, json, runpy, sys, traceback\n"
        "askers = []\n"
        "class Watch:\n"  # the file whose import statement asked for sklearn: the last frame outside importlib
        "    def find_spec(self, name, path=None, target=None):\n"
        "        frames = [f.filename for f in traceback.extract_stack()[:-1]]\n"
        "        if name == 'sklearn' and not any('importlib.util' in f or 'importlib/util' in f for f in frames):\n"
        "            askers.append([f for f in frames if f[0] != '<'][-1])\n"  # (a find_spec imports nothing)
        "        return None\n"
        "sys.meta_path.insert(0, Watch())\n"
        "atexit.register(lambda: print(json.dumps(['pytorch_lightning' in sys.modules, askers])))\n"  # train.py's
        f"sys.argv = ['train.py', '--quiet', '--run.rounds', '1', '--out', {str(tmp_path / 'run')!r}]\n"  # end runs it
        f"runpy.run_path({str(root / 'train.py')!r}, run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lightning, askers = json.loads(proc.stdout.strip().splitlines()[-1])
    assert lightning
    ours = [f for f in askers if f.startswith(str(root)) and "site-packages" not in f]
    audit = str(root / "vcl" / "audit" / "attacks.py")  # the audit's learners, after the rounds (run.audit)
    assert [f for f in ours if f != audit] == [], f"vcl files that imported scikit-learn: {ours}"
    assert (tmp_path / "run" / "results.json").is_file()


def test_replies_that_lie_in_order_in_one_block_are_stacked_without_a_copy():
    """Alice's stack of the organizations' outputs: a view when the replies are consecutive pieces of one tensor
    (organizations fitted together), else a copy; equal to ``torch.stack`` either way."""
    import torch

    from vcl.methods.assisted import _stacked

    block = torch.randn(5, 7, 3)
    in_order = [block[m].detach() for m in range(5)]
    assert torch.equal(_stacked(in_order), block) and _stacked(in_order).data_ptr() == block.data_ptr()
    tail = block[2:]
    assert _stacked([tail[m] for m in range(3)]).data_ptr() == tail.data_ptr()
    for parts in ([block[m] for m in (0, 2, 1, 3, 4)], [block[m] for m in (0, 1, 3)], [block[0], block[1].clone()]):
        stacked = _stacked(parts)
        assert torch.equal(stacked, torch.stack(parts)) and stacked.data_ptr() != block.data_ptr()
    columns = block[:, :, 0]  # pieces of one block, but not contiguous
    assert torch.equal(_stacked(list(columns)), columns) and _stacked(list(columns)).data_ptr() != block.data_ptr()


HEAP = """
import ctypes, sys
from vcl.engine.memory import reuse_freed_memory
libc = ctypes.CDLL(None)
if not hasattr(libc, "mallinfo2"):
    print("no-glibc")
    sys.exit()
class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(k, ctypes.c_size_t) for k in ("arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks "
                                               "fordblks keepcost").split()]
libc.mallinfo2.restype, libc.malloc.restype, libc.malloc.argtypes = Info, ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
applied = reuse_freed_memory() if sys.argv[1] == "reuse" else False
mapped = libc.mallinfo2().hblks
block = libc.malloc(8 << 20)  # a 2,000 × 1,000 float32 tensor's worth
from_heap = libc.mallinfo2().hblks == mapped
libc.free(block)
print(applied, from_heap, libc.mallinfo2().arena >= 8 << 20)
"""


def glibc_script(script: str, how: str) -> subprocess.CompletedProcess:
    """``script`` run in a process of its own with ``how`` (reuse, default); skipped where the C library is not
    glibc."""
    proc = subprocess.run([sys.executable, "-c", script, how], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if proc.stdout.strip() == "no-glibc":
        pytest.skip("this C library is not glibc")
    return proc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc thresholds: Linux only")
def test_reusing_freed_memory_serves_large_blocks_from_the_heap_and_keeps_them():
    """vcl.engine.memory: with glibc's thresholds set, an 8 MiB block (a tensor of a round at M = 64) comes from
    malloc's heap and, freed, stays there for the next one; with malloc's own it is mapped from the kernel and given
    back (so the next round's tensor faults its pages in again)."""
    runs = {how: glibc_script(HEAP, how).stdout.split() for how in ("reuse", "default")}
    assert runs["reuse"] == ["True", "True", "True"]
    assert runs["default"] == ["False", "False", "False"]


ARENAS = """
import ctypes, os, sys, threading
from vcl.engine.memory import reuse_freed_memory
libc = ctypes.CDLL(None)
if not hasattr(libc, "malloc_stats"):
    print("no-glibc")
    sys.exit()
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
if sys.argv[1] == "reuse":
    reuse_freed_memory()
held, ready = [], threading.Barrier(2 * (os.cpu_count() or 1) + 2)
def work():
    held.append(libc.malloc(1 << 20))  # each thread's first block: an arena of its own while the limit allows
    ready.wait()
threads = [threading.Thread(target=work) for _ in range(ready.parties - 1)]
for t in threads:
    t.start()
ready.wait()
for t in threads:
    t.join()
libc.malloc_stats()  # one "Arena k:" paragraph per arena, on stderr
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc arenas: Linux only")
def test_reusing_freed_memory_keeps_one_malloc_arena_per_core():
    """vcl.engine.memory: glibc gives each new thread an arena of its own up to 8 per core, each holding its freed
    memory (a 10^5-row run's threads: tens of MB); with reuse_freed_memory the threads share one per core (two at
    least)."""
    import os

    count = {how: glibc_script(ARENAS, how).stderr.count("Arena ") for how in ("reuse", "default")}
    cores = max(2, os.cpu_count() or 1)
    assert 1 <= count["reuse"] <= cores < count["default"]


PROBE = """
import sys
from pathlib import Path
from vcl.engine.memory import prepare_process
if sys.argv[1] == "prepared":
    prepare_process()
from vcl.datamodules.csv_files import load_csv_organizations
folder = Path(sys.argv[2])
for name, column in (("alice", "label"), ("org1", "x")):
    rows = [f"p{i},{i % 2},{i * 0.5}" for i in range(20)]
    (folder / f"{name}.csv").write_text(f"id,{column},y\\n" + "\\n".join(rows) + "\\n")
table = load_csv_organizations([folder / "alice.csv", folder / "org1.csv"], task="classification")
print(table.rows, "pandas" in sys.modules)
import pyarrow as pa
print(type(pa.table({"a": [1]}).to_pandas()).__name__)
"""


def test_a_prepared_process_reads_and_aligns_files_without_importing_pandas_and_can_still_use_it(tmp_path):
    """vcl.engine.memory.answer_pandas_probe: pyarrow's first conversion of a Python value imports pandas (0.2 s, 42 MB
    a process); a prepared process reads, checks and aligns CSV files without it, and pandas still works after."""
    runs = {}
    for how in ("prepared", "plain"):
        (tmp_path / how).mkdir()
        proc = subprocess.run([sys.executable, "-c", PROBE, how, str(tmp_path / how)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        runs[how] = proc.stdout.split()
    assert runs["prepared"] == ["20", "False", "DataFrame"]
    assert runs["plain"] == ["20", "True", "DataFrame"]  # the probe this answers


@pytest.mark.slow
def test_rounds_freeze_what_exists_and_leave_the_collector_as_they_found_it():
    """vcl.coordinator.runner.long_lived_frozen: inside, the objects that existed on entry are frozen (out of the
    collector's scans); after, none are; objects a caller froze stay frozen, and its freeze is left alone."""
    # in a fresh process, from no frozen objects (the GPU machine's Python starts with 375 frozen, even with -S)
    script = """
import gc
from vcl.coordinator.runner import long_lived_frozen
gc.unfreeze()
with long_lived_frozen():
    assert gc.get_freeze_count() > 0
assert gc.get_freeze_count() == 0
gc.freeze()
kept = gc.get_freeze_count()
with long_lived_frozen():
    assert gc.get_freeze_count() == kept
assert gc.get_freeze_count() == kept
"""
    subprocess.run([sys.executable, "-c", script], check=True)
