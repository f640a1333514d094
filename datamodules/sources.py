"""Tabular data sources: scikit-learn's datasets, GAL's blob, Boston housing, CSV per organization,
ASCII's synthetic blobs and digit halves, the DC paper's artificial problem, and UCI Bank Marketing
(MPDL Table III; read from ``bank-full.csv`` under the data root).

Each source gives a :class:`Table`: aligned rows ``X`` (n × d), labels ``y``, column names, the task
kind, and — for CSV data and image halves — the column groups that define the organizations. A
generated source may fix its own split (``train_rows`` first, or explicit ``test_rows``). A source with
one-hot encoded attributes names each column's attribute (``attributes``) so that random splits keep an
attribute's columns together.
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np
import torchvision
from mlxtend.data import boston_housing_data
from vcl.datamodules.csv_files import load_csv_organizations
from vcl.datamodules.table import Table, _finish

from vcl.errors import VCLInputError
from vcl.registry import datasets_of

TORCHVISION = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST", "cifar10": "CIFAR10"}  # image sets torchvision reads

SKLEARN = {
    "wine": ("load_wine", "classification"),
    "iris": ("load_iris", "classification"),
    "breast_cancer": ("load_breast_cancer", "classification"),
    "diabetes": ("load_diabetes", "regression"),
    "digits": ("load_digits", "classification"),
}
# scikit-learn's small tables that it ships as plain CSV files (first line: rows, columns, class names), read
# straight from the installed package: importing scikit-learn (and SciPy with it) costs a second at start-up.
# The column names are scikit-learn's (a test holds the tables equal to its loaders').
_CANCER = ["radius", "texture", "perimeter", "area", "smoothness", "compactness", "concavity", "concave points",
           "symmetry", "fractal dimension"]  # fmt: skip
BUNDLED_CSV = {
    "wine": ("wine_data.csv", ["alcohol", "malic_acid", "ash", "alcalinity_of_ash", "magnesium", "total_phenols",
                               "flavanoids", "nonflavanoid_phenols", "proanthocyanins", "color_intensity", "hue",
                               "od280/od315_of_diluted_wines", "proline"]),
    "iris": ("iris.csv", ["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"]),
    "breast_cancer": ("breast_cancer.csv", [f"mean {c}" for c in _CANCER] + [f"{c} error" for c in _CANCER]
                      + [f"worst {c}" for c in _CANCER]),
}  # fmt: skip
# ASCII Section VI: isotropic Gaussian blobs (make_blobs defaults: centers in [-10, 10]^d, std 1).
SYNTHETIC = {
    "ascii_blobs": {"classes": 10, "features": 8, "noise": 0},  # Fig. 3a: four agents with two columns each
    "ascii_blobs20": {"classes": 20, "features": 20, "noise": 0},  # Fig. 6a: twenty one-feature agents
    "ascii_blobs_redundant": {"classes": 10, "features": 5, "noise": 195},  # Fig. 4a: 5 + 195 features, two agents
    # Fig. 1's toy: 9 classes centred on a 3 x 3 grid (spacing 5) of two features, one feature per agent
    "ascii_blobs9": {"classes": 9, "features": 2, "noise": 0, "grid": 5.0},
}
DATASETS = datasets_of("table")  # the registry's tables (each has its loader here: tested)
BANK_FILES = ("bank-full.csv", "bank/bank-full.csv")  # UCI's bank.zip unpacked into the data root


def synthetic_blobs(name: str, train: int, test: int, seed: int) -> Table:
    """ASCII's blobs: ``train`` + ``test`` rows drawn at once (train 10³, test 10⁵ in the paper), seeded.

    The 195 extra features of ``ascii_blobs_redundant`` carry no signal (N(0, 1) columns): the paper calls
    them redundant; linear combinations of the five would hand either agent the whole signal. A ``grid`` spec
    (``ascii_blobs9``) puts the centres on a regular grid with that spacing, centred on 0, instead of drawing
    them: one feature alone then tells apart only a row of the grid.
    """
    from sklearn.datasets import make_blobs

    spec = SYNTHETIC[name]
    centers = spec["classes"]
    if spec.get("grid"):
        side = round(spec["classes"] ** (1 / spec["features"]))
        axis = spec["grid"] * (np.arange(side) - (side - 1) / 2)
        centers = np.stack(np.meshgrid(*[axis] * spec["features"], indexing="ij"), -1).reshape(-1, spec["features"])
    X, y = make_blobs(n_samples=train + test, n_features=spec["features"], centers=centers, random_state=seed)
    if spec["noise"]:
        X = np.hstack([X, np.random.RandomState(seed + 1).randn(X.shape[0], spec["noise"])])
    names = [f"x{i}" for i in range(spec["features"])] + [f"noise{i}" for i in range(spec["noise"])]
    table = _finish(X, y, names, "classification")
    table.train_rows = train
    return table


def bundled_csv(dataset: str) -> Table | None:
    """``dataset``'s table from the CSV file scikit-learn installs, without importing scikit-learn; None when the
    file is not where this scikit-learn keeps it or not of the expected shape (then its loader is used)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    filename, names = BUNDLED_CSV[dataset]
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / filename
    try:
        with path.open(encoding="utf-8") as f:
            rows, columns = (int(v) for v in f.readline().split(",")[:2])
            values = np.loadtxt(f, delimiter=",", dtype=np.float64, ndmin=2)
    except (OSError, ValueError):
        return None
    if values.shape != (rows, columns + 1) or len(names) != columns:
        return None
    return _finish(values[:, :-1], values[:, -1].astype(np.int64), list(names), "classification")


def digits_halves() -> Table:
    """scikit-learn's 8 × 8 digits cut into left and right halves (two organizations; ASCII Fig. 4b/5's setting)."""
    import sklearn.datasets

    bunch = sklearn.datasets.load_digits()
    table = _finish(bunch.data, bunch.target, [str(c) for c in bunch.feature_names], "classification")
    cols = np.arange(64) % 8
    table.groups = [np.flatnonzero(cols < 4).tolist(), np.flatnonzero(cols >= 4).tolist()]
    table.group_names = ["alice", "bob"]
    return table


def fashion_mnist_halves(root: str = "data") -> Table:
    """Fashion-MNIST's 70,000 28 × 28 images cut into left and right halves (two organizations of 392 pixels; ASCII
    Fig. 4b/5's setting), with its own split: the 60,000 training images, then the 10,000 test images, read by
    torchvision from where ``make data`` lays them out under ``root``."""
    sets = torchvision_sets("fashion_mnist", Path(root))
    x = np.concatenate([s.data.numpy().reshape(len(s), -1) for s in sets]).astype(np.float32) / 255.0
    y = np.concatenate([s.targets.numpy() for s in sets])
    table = _finish(x, y, [f"pixel{i}" for i in range(784)], "classification")
    cols = np.arange(784) % 28
    table.groups = [np.flatnonzero(cols < 14).tolist(), np.flatnonzero(cols >= 14).tolist()]
    table.group_names = ["alice", "bob"]
    table.train_rows = len(sets[0])
    return table


def torchvision_sets(name: str, root: Path) -> list:
    """The training and test sets of an image data set torchvision reads (:data:`TORCHVISION`) from ``root``, or the
    one sentence of :func:`missing_images`."""
    cls = getattr(torchvision.datasets, TORCHVISION[name])
    try:
        return [cls(str(root), train=train) for train in (True, False)]
    except (RuntimeError, OSError) as err:
        raise missing_images(name, root, err) from None


def missing_images(name: str, root: Path, err: Exception) -> VCLInputError:
    """One sentence for an image data set whose files are not under ``root``, naming how to put them there."""
    fix = ("run `make data` (Debian's dataset-fashion-mnist package, laid out under data/FashionMNIST/raw/) or put "
           "the four IDX files under data.root's FashionMNIST/raw/" if name == "fashion_mnist" else
           "put the released files there (as torchvision lays them out)")  # fmt: skip
    return VCLInputError(
        f"data.dataset={name}: no {TORCHVISION[name]} files under data.root={str(root)!r} ({err}); {fix}, or set "
        "data.download=true on a machine with internet."
    )


def load_table(
    dataset: str,
    csv_files=(),
    id_column="id",
    label_column="label",
    task=None,
    synthetic_train: int = 1000,
    synthetic_test: int = 100000,
    seed: int = 0,
    root: str = "data",
    only: int | None = None,
    ids: list[str] | None = None,
    categorical=("error",),
    missing=("error",),
) -> Table:
    """``only``/``ids``: one CSV organization's file alone (:func:`load_csv_organizations`); ``categorical``,
    ``missing``: what each CSV organization does with text categories and missing values.
    ``seed`` draws the generated datasets (ASCII's blobs, dc_artificial); the fixed ones ignore it.
    ``root``: where files a user downloads live (``bank_marketing``)."""
    if dataset in SYNTHETIC:
        return synthetic_blobs(dataset, synthetic_train, synthetic_test, seed)
    if dataset == "digits_halves":
        return digits_halves()
    if dataset == "fashion_mnist_halves":
        return fashion_mnist_halves(root)
    if dataset in BUNDLED_CSV and (table := bundled_csv(dataset)) is not None:
        return table
    if dataset in SKLEARN:
        import sklearn.datasets

        loader, kind = SKLEARN[dataset]
        bunch = getattr(sklearn.datasets, loader)()
        names = [str(c) for c in getattr(bunch, "feature_names", [f"x{i}" for i in range(bunch.data.shape[1])])]
        return _finish(bunch.data, bunch.target, names, kind)
    if dataset == "blob":  # GAL Table 7: 100 samples, 10 features, 10 classes
        from sklearn.datasets import make_blobs

        X, y = make_blobs(n_samples=100, n_features=10, centers=10, random_state=0)
        return _finish(X, y, [f"x{i}" for i in range(10)], "classification")
    if dataset == "boston":
        X, y = boston_housing_data()
        names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT"]
        return _finish(X, y, names, "regression")
    if dataset == "dc_artificial":
        return dc_artificial(seed)
    if dataset == "csv":
        return load_csv_organizations(csv_files, id_column, label_column, task, only, ids, categorical, missing)
    if dataset == "bank_marketing":
        return bank_marketing(root)
    raise VCLInputError(f"data.dataset={dataset!r} is unknown; use one of {', '.join(DATASETS)}.")


def bank_marketing(root: str = "data") -> Table:
    """UCI Bank Marketing (Moro et al. 2014; MPDL Table III): ``bank-full.csv``, 45,211 clients, 16
    attributes and the label ``y`` (did the client subscribe a term deposit: no/yes), ``;``-separated
    with quoted strings. Numeric attributes stay numeric; two-level ones become one 0/1 column; the
    others are one-hot encoded (levels sorted) — 48 columns, the paper's count. ``attributes`` keeps
    each column's attribute, so parties get whole attributes, as the paper assigns them."""
    base = Path(root)
    path = next((base / f for f in BANK_FILES if (base / f).is_file()), None)
    if path is None:
        raise VCLInputError(
            f"data.dataset=bank_marketing needs bank-full.csv under data.root={root!r} (looked for "
            f"{', '.join(BANK_FILES)}); download bank.zip from https://archive.ics.uci.edu/dataset/222/bank+marketing "
            "and unpack it there."
        )
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh, delimiter=";"))
    header, body = rows[0], [r for r in rows[1:] if r]
    if "y" not in header or any(len(r) != len(header) for r in body):
        raise VCLInputError(
            f"{path} is not UCI's bank-full.csv: it needs a 'y' column and {len(header)} fields on every row."
        )
    label = header.index("y")
    columns, names, attributes = [], [], []
    for j, attribute in enumerate(header):
        if j == label:
            continue
        values = [r[j] for r in body]
        try:
            columns.append(np.array([float(v) for v in values]))
            names.append(attribute)
            attributes.append(attribute)
            continue
        except ValueError:
            pass
        levels = sorted(set(values))
        if len(levels) == 2:  # no/yes: one column, 1 for the second level
            levels = levels[1:]
        for level in levels:
            columns.append(np.array([v == level for v in values], dtype=np.float64))
            names.append(f"{attribute}={level}")
            attributes.append(attribute)
    table = _finish(np.column_stack(columns), [r[label] for r in body], names, "classification")
    table.attributes = attributes
    return table


def dc_artificial(seed: int = 0, n_train: int = 1100, n_test: int = 1000, noise: float = 0.5) -> Table:
    """The DC paper's 20-dimensional two-class problem (Section 4.2): features 1–3 essential, 17 noise.

    Features 1–3 are the corners ``s ∈ {−1, 1}³`` of a cube plus N(0, 0.25²) jitter and the class is the
    majority sign of ``s`` — separable by five axis-aligned splits, as the paper's 5-split tree needs;
    a party that sees only features {1, 3} or {2} is right 3/4 of the time (the paper's Local 0.75).
    Features 4–20 are N(0, ``noise``²). The last ``n_test`` rows are the test rows; the DC datamodule
    takes the public rows X_pub from the first ``n_train`` (1,000 train + 100 public by default).
    """
    rng = np.random.RandomState(seed)
    n = n_train + n_test
    corners = rng.choice([-1.0, 1.0], size=(n, 3))
    X = np.hstack([corners + 0.25 * rng.randn(n, 3), noise * rng.randn(n, 17)])
    y = (corners.sum(1) > 0).astype(np.int64)
    table = _finish(X, y, [f"x{i}" for i in range(1, 21)], "classification")
    table.test_rows = np.arange(n_train, n)
    return table
