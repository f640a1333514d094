"""docs/extending.md's own method: two blocks of a page, copied to a folder outside the project, run by
``python train.py --config my_method.yaml`` under local, ray and grpc with equal results; nothing in vcl names it."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"


def example_files() -> dict[str, str]:
    """The page's fenced blocks whose first line is ``# my_method.py`` / ``# my_method.yaml``, by file name."""
    blocks = re.findall(r"^```\w*\n(.*?)^```", PAGE.read_text(), flags=re.M | re.S)
    return {m[1]: b for b in blocks if (m := re.match(r"# (my_method\.\w+)\n", b))}


def test_the_example_is_whole_small_and_named_nowhere_in_vcl():
    files = example_files()
    assert sorted(files) == ["my_method.py", "my_method.yaml"]
    assert len(files["my_method.py"].splitlines()) <= 200
    for folder in ("vcl", "models", "datamodules", "callbacks"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            assert "StumpBoosting" not in text and "my_method" not in text, path


def test_each_built_in_family_is_its_registry_entry():
    from vcl.family import Family, load_family
    from vcl.registry import FAMILIES, METHODS

    for name, path in FAMILIES.items():
        family = load_family(path)
        assert isinstance(family, Family) and family.name == name
        assert set(family.methods) == {m for m, f in METHODS.items() if f == name}
        assert family.reference in family.methods and set(family.peer_messages) <= set(family.messages)


def _train(folder: Path, out: str, *flags: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(folder), OMP_NUM_THREADS="1")
    argv = [sys.executable, str(ROOT / "train.py"), "--config", "my_method.yaml", "--out", out, "--quiet", *flags]
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads((folder / out / "results.json").read_text())


def _same(run: dict, local: dict) -> None:
    assert run["value"] == local["value"] and run["bytes_sent"] == local["bytes_sent"]
    assert run["prediction_stage"] == local["prediction_stage"]
    assert [r["metrics"] for r in run["rounds"]] == [r["metrics"] for r in local["rounds"]]
    assert [r["chosen"] for r in run["rounds"][1:]] == [r["chosen"] for r in local["rounds"][1:]]


def test_the_own_methods_batch_fits_a_rounds_stumps_in_one_pass_as_each_alone(tmp_path, monkeypatch):
    """The example's batched fit (``StumpOrganization.handle_batch``, the contract's entry, called by the host of the
    local transport): a round's residual requests to three organizations are fitted in one call, and every
    organization replies as it does alone."""
    import torch

    from datamodules.tabular import FeatureView
    from vcl.methods.messages import PseudoResidual
    from vcl.party.runtime import PartyHost, PartyRuntime

    (tmp_path / "my_method.py").write_text(example_files()["my_method.py"])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_method", raising=False)
    import my_method

    torch.manual_seed(0)
    views = [FeatureView(f"org{m}", [], {"train": torch.randn(60, d)}) for m, d in enumerate((3, 1, 4))]
    residual = torch.randn(60, 2)

    def organizations():
        return {v.name: my_method.StumpOrganization(v, my_method.StumpOptions()) for v in views}

    def asked():
        return [(n, PseudoResidual("alice", n, 1, residual)) for n in ("org0", "org1", "org2")]

    each = organizations()
    alone = [each[n].handle(m) for n, m in asked()]
    calls = []
    fit = my_method.fit_stumps
    monkeypatch.setattr(my_method, "fit_stumps", lambda *a: calls.append(a[3]) or fit(*a))
    parties = organizations()
    together = PartyHost({n: PartyRuntime(p, n) for n, p in parties.items()}, together=True).handle_all(asked())
    assert calls == [[3, 1, 4]]  # one pass, no organization fitted again in its own handle
    assert [r.error for r in together] == [r.error for r in alone]
    assert [p.candidate for p in parties.values()] == [p.candidate for p in each.values()]


@pytest.mark.slow
def test_the_own_method_runs_from_outside_the_project_under_every_transport(tmp_path, monkeypatch):
    from vcl.transports.loopback import LoopbackFederation

    folder = tmp_path / "outside"
    folder.mkdir()
    for name, text in example_files().items():
        (folder / name).write_text(text)
    local = _train(folder, "local")
    assert local["method"] == "stumps" and len(local["rounds"]) == 11 and local["value"] > 0.8
    assert {r["chosen"] for r in local["rounds"][1:]} > {"alice"}  # more than Alice's stumps were kept
    _same(_train(folder, "ray", "--transport.kind", "ray"), local)
    names = ["alice", "org1", "org2", "org3"]
    own = {n: {"allow_classes": ["my_method.StumpBoosting"]} for n in names}
    monkeypatch.setenv("PYTHONPATH", str(folder))  # each party process imports my_method where it runs
    with LoopbackFederation(tmp_path / "fed", names, own=own) as fed:
        flags = [(f"--{k}", json.dumps(v) if isinstance(v, dict) else str(v)) for k, v in fed.overrides().items()]
        grpc = _train(folder, "grpc", *[x for pair in flags for x in pair])
    _same(grpc, local)
    assert grpc["transport"] == "grpc"
