"""Image patches and sequence feature groups: geometry, views, loaders on generated files in the real formats."""

import struct
import urllib.error
import urllib.request

import numpy as np
import pytest
import torch
from vcl.datamodules import (
    ImageDataModule,
    SequenceDataModule,
    patch_boxes,
    patch_grid,
    split_image_views,
    synthetic_sequences,
)
from vcl.datamodules.image import load_images

from tests.conftest import write_cifar_batches
from vcl.errors import VCLInputError


@pytest.mark.parametrize(
    "m,height,width,shape",
    [(1, 28, 28, (28, 28)), (2, 28, 28, (28, 14)), (4, 28, 28, (14, 14)), (8, 28, 28, (14, 7)), (8, 32, 32, (16, 8))],
)
def test_patch_geometry_covers_every_pixel_once(m, height, width, shape):
    owner = np.full((height, width), -1)
    for k, (t, b, left, r) in enumerate(patch_boxes(height, width, m)):
        assert (b - t, r - left) == shape
        assert (owner[t:b, left:r] == -1).all()
        owner[t:b, left:r] = k
    assert (owner >= 0).all()
    rows, cols = patch_grid(m)
    assert rows * cols == m
    if m == 2:  # left and right halves, as ASCII's two parties
        assert owner[0, 0] == 0 and owner[0, -1] == 1 and (owner[:, :14] == 0).all()


def test_bad_organization_counts_are_refused():
    with pytest.raises(VCLInputError, match="power|2\\^k"):
        patch_grid(3)
    with pytest.raises(VCLInputError, match="grid"):
        patch_boxes(2, 2, 8)


def test_patch_and_masked_views_see_the_same_pixels():
    images = {"train": torch.randn(5, 3, 8, 8) + 3.0}
    patch = split_image_views(images, 8, "patch")
    masked = split_image_views(images, 8, "masked")
    seen = torch.zeros(8, 8)
    for p, q in zip(patch, masked, strict=True):
        assert p.columns == q.columns
        nonzero = (q.splits["train"] != 0).any(0).any(0)  # pixels this organization holds
        assert int(nonzero.sum()) == p.splits["train"][0, 0].numel()
        assert torch.equal(q.splits["train"][:, :, nonzero].flatten(), p.splits["train"].flatten())
        seen += nonzero
    assert torch.equal(seen, torch.ones(8, 8))  # each pixel belongs to exactly one organization


def test_digits_image_datamodule_splits_and_normalizes():
    dm = ImageDataModule("digits_image", organizations=4, test_fraction=0.2, val_fraction=0.1)
    dm.setup()
    data = dm.data
    assert [tuple(v.splits["train"].shape[1:]) for v in data.views] == [(1, 4, 4)] * 4
    n = {s: len(y) for s, y in data.labels.items()}
    assert sum(n.values()) == 1797 and n["test"] == 1797 - int(1797 * 0.8)
    assert data.joint.splits["train"].shape[1:] == (1, 8, 8)
    assert abs(float(data.joint.splits["train"].mean())) < 1e-4  # standardized with training statistics
    x, y = next(iter(dm.dataloader("train", organization=2)))
    assert x.shape[1:] == (1, 4, 4) and y.dtype == torch.int64


def _write_idx_mnist(root, n_train=24, n_test=10, seed=0, folder="MNIST"):
    rng = np.random.RandomState(seed)
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes())
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, n) + labels.tobytes())
    return images, labels


def test_torchvision_mnist_reader_reads_generated_idx_files(tmp_path):
    test_images, test_labels = _write_idx_mnist(tmp_path)
    dm = ImageDataModule("mnist", organizations=8, root=str(tmp_path))
    dm.setup()
    assert len(dm.data.labels["train"]) == 24 and torch.equal(dm.data.labels["test"], torch.from_numpy(test_labels))
    assert [tuple(v.splits["test"].shape) for v in dm.data.views] == [(10, 1, 14, 7)] * 8
    # the test images come back in order: undo the standardization and compare a patch
    assert dm.data.views[0].splits["test"].std() > 0


def test_fashion_mnist_halves_give_each_agent_half_of_every_image_and_keep_the_own_split(tmp_path):
    """ASCII Fig. 4(b)/5's table: 28 × 14 pixels an agent (A the left half), the 24 training images first, in the IDX
    files' order, as the ``make data`` layout has them."""
    from vcl.datamodules.sources import load_table

    from vcl.config import RunConfig
    from vcl.coordinator.assembly import datamodule_for

    test_images, test_labels = _write_idx_mnist(tmp_path, folder="FashionMNIST")
    table = load_table("fashion_mnist_halves", root=str(tmp_path))
    assert table.train_rows == 24 and table.rows == 34 and [len(g) for g in table.groups] == [392, 392]
    left = np.asarray(table.groups[0]) % 28
    assert left.max() == 13 and (np.asarray(table.groups[1]) % 28).min() == 14
    np.testing.assert_allclose(table.X[24:], test_images.reshape(10, -1) / 255.0, rtol=1e-6)
    values = {"method": "ascii", "data.dataset": "fashion_mnist_halves", "data.organizations": 2,
              "data.root": str(tmp_path), "compare": []}  # fmt: skip
    dm = datamodule_for(RunConfig.from_dict(values))
    dm.setup()
    assert {k: len(v) for k, v in dm.data.labels.items()} == {"train": 24, "test": 10}
    assert torch.equal(dm.data.labels["test"], torch.from_numpy(test_labels.astype(np.int64)))


def test_mpdl_splits_fashion_mnist_into_its_two_overlapping_parties(tmp_path):
    """MPDL's Table I and Figures 5-6 at full size: Fashion-MNIST's training and test images pooled, A holding the
    bottom 18 rows of every image, B all but the stained 14 × 16 lower-right corner, as for MNIST."""
    from vcl.datamodules.overlap import OverlapDataModule

    _write_idx_mnist(tmp_path, n_train=60, n_test=20, folder="FashionMNIST")
    dm = OverlapDataModule("fashion_mnist", gamma=0.5, root=str(tmp_path))
    dm.setup()
    d = dm.data
    assert dm.image_shape == (1, 28, 28) and d.num_classes == 10
    assert d.a.train.shape[1] == 18 * 28 and d.b.train.shape[1] == 28 * 28 - 14 * 16
    assert len(d.a.test) == len(d.b.test) == 8  # 10 % of the 80 pooled images


def test_the_fashion_mnist_benchmarks_say_make_data_before_any_run(tmp_path, capsys):
    from tests.helpers import benchmark

    gal_images = benchmark("gal_images")
    args = gal_images.parse_args(["--datasets", "fashion_mnist", "--data-root", str(tmp_path)])
    with pytest.raises(SystemExit) as stop:
        gal_images.present("fashion_mnist", args)
    assert stop.value.code == 2 and "make data" in capsys.readouterr().err
    _write_idx_mnist(tmp_path, folder="FashionMNIST")
    assert gal_images.present("fashion_mnist", args)
    runs = [values for ds, values in gal_images.settings(args)]
    assert [v["data.organizations"] for v in runs] == [2, 4, 8] and {v["run.rounds"] for v in runs} == {5}


def test_cifar10_reader_reads_generated_python_batches(tmp_path):
    write_cifar_batches(tmp_path)
    dm = ImageDataModule("cifar10", organizations=4, root=str(tmp_path))
    dm.setup()
    assert len(dm.data.labels["train"]) == 20 and dm.data.num_classes == 4
    assert [tuple(v.splits["train"].shape[1:]) for v in dm.data.views] == [(3, 16, 16)] * 4


def test_a_crafted_cifar_batch_runs_nothing_and_is_refused(tmp_path):
    """CIFAR-10's batches are pickles: one whose loading would create a file is refused before it can."""
    import pathlib
    import pickle

    class Touch:
        def __reduce__(self):
            return (pathlib.Path.touch, (tmp_path / "pwned",))

    write_cifar_batches(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(pickle.dumps({"data": Touch(), "labels": []}))
    with pytest.raises(VCLInputError, match="is not a CIFAR-10 batch .*names pathlib"):
        load_images("cifar10", tmp_path)
    assert not (tmp_path / "pwned").exists()


def test_missing_files_and_offline_download_fail_clearly(tmp_path, monkeypatch, capsys):
    with pytest.raises(VCLInputError, match="data.root=.*data.download=true"):
        ImageDataModule("mnist", organizations=2, root=str(tmp_path)).setup()
    # Fashion-MNIST without its files: one sentence naming the command that lays them out, exit 2, nothing written
    import train as cli

    out = tmp_path / "run"
    assert cli.main(["--data.dataset", "fashion_mnist", "--data.root", str(tmp_path), "--out", str(out)]) == 2
    said = capsys.readouterr().err.strip()
    assert said.count("\n") == 0 and "run `make data`" in said and "data/FashionMNIST/raw/" in said, said
    assert not out.exists()

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(VCLInputError, match="download into .* failed.*offline"):
        ImageDataModule("fashion_mnist", organizations=2, root=str(tmp_path), download=True).prepare_data()


def test_synthetic_sequences_spread_the_signal_over_the_groups():
    from sklearn.linear_model import LogisticRegression

    x, y, groups = synthetic_sequences(n=1200, groups=4, seed=0)
    summary = x[:, 12:].mean(1)  # second-half means of every feature
    fit = lambda cols: LogisticRegression().fit(summary[:900, cols], y[:900]).score(summary[900:, cols], y[900:])  # noqa: E731
    alone, everyone = fit(groups == 0), fit(groups >= 0)
    assert everyone > 0.9 and everyone > alone + 0.15


def test_sequence_datamodule_groups_features_by_organization(tmp_path):
    dm = SequenceDataModule("sequence_synthetic", organizations=4, size=200)
    dm.setup()
    assert [tuple(v.splits["train"].shape[1:]) for v in dm.data.views] == [(24, 3)] * 4
    assert dm.data.joint_view().splits["test"].shape == (40, 24, 12)
    x = np.random.RandomState(0).randn(30, 5, 4).astype(np.float32)
    path = tmp_path / "seq.npz"
    np.savez(path, X=x, y=np.arange(30) % 2, groups=np.array([1, 0, 1, 0]))
    dm = SequenceDataModule("npz", organizations=2, root=str(path))
    dm.setup()
    assert [v.columns for v in dm.data.views] == [["x1", "x3"], ["x0", "x2"]]
    np.savez(path, X=x, y=np.arange(29))
    with pytest.raises(VCLInputError, match="one label per sequence"):
        SequenceDataModule("npz", root=str(path)).setup()
