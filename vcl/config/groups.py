"""The option groups of a run, one per concern (``data``, ``run``, ``learner``, ``transport``; the method families'
in :mod:`vcl.config.families`): each option's type says what it takes and its docstring is its help. Imports no
torch."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonargparse.typing import NonNegativeFloat, NonNegativeInt, OpenUnitInterval, PositiveFloat, PositiveInt

from vcl.errors import VCLInputError
from vcl.registry import CLASS_PATH, DATASETS, METHODS, TRANSPORTS


def estimator_spec(entry: str | dict, option: str, other: str = "sklearn") -> str:
    """A name as given, or ``{class_path, init_args}`` as its one-line form ``<kind>:<class_path>`` followed by
    the init args as a JSON object (what the learners and DC read; printed configs show this form). ``kind`` is
    ``sklearn`` for a scikit-learn class, else ``other`` (``module``: a user LightningModule as a learner;
    ``callback``: a Lightning callback)."""
    if isinstance(entry, str):
        return entry
    what = "a class" if other != "sklearn" else "an estimator"
    if set(entry) - {"class_path", "init_args"} or not isinstance(entry.get("class_path"), str):
        raise VCLInputError(
            f"{option}={entry!r}: name {what} as {{class_path: <package.module.Class>, init_args: {{...}}}}."
        )
    args = entry.get("init_args") or {}
    if not isinstance(args, dict):
        raise VCLInputError(f"{option}: init_args={args!r} is not a mapping of argument names to values.")
    kind = "sklearn" if entry["class_path"].startswith("sklearn.") else other
    return f"{kind}:{entry['class_path']}" + (json.dumps(args, sort_keys=True) if args else "")


FLOAT32_MAX = 3.4028234663852886e38  # every number option ends up in float32 tensors or arithmetic
FLOAT32_TINY = 1.1754943508222875e-38  # float32's smallest normal number: a divisor below it overflows
SEED_LIMIT = 2**32  # seeds feed NumPy's and torch's generators: 0 .. 2³² − 1


def seed_in_range(option: str, seed: int) -> None:
    if not 0 <= seed < SEED_LIMIT:
        raise VCLInputError(f"{option}={seed} is out of range; use a whole number from 0 to {SEED_LIMIT - 1}.")


def listed(group, *names: str) -> None:
    """Options that take one value for all or one each hold a list, whichever was given."""
    for name in names:
        if not isinstance(getattr(group, name), list):
            setattr(group, name, [getattr(group, name)])


Method = Literal[tuple(METHODS)]  # every method in the registry (vcl/registry.py)
Dataset = Literal[tuple(DATASETS)]  # every dataset in the registry
Missing = Literal["error", "drop", "impute"]
LocalLoss = Literal["auto", "l1", "l1.5", "l2", "l4"]
# a scikit-learn estimator named in a config: {class_path: sklearn.<module>.<Class>, init_args: {...}} (plain data;
# nothing is imported here, and only scikit-learn classes ever are: vcl.models.sklearn)
Estimator = dict[str, Any]
# Where parties run and how a run is shown, not what it computes: a run may resume with other values.
NOT_IDENTITY = (
    "out", "compare", "run.rounds", "run.device", "run.concurrent", "run.engine", "data.download",
    "gal.early_stop_eta", "transport", "data.predict_files",
    "run.missing_parties",
)  # fmt: skip


# PositiveInt and friends bound numbers when jsonargparse parses (a dataclass built in code holds plain numbers)


@dataclass
class DataGroup:
    """data: which rows and features, and how they are split among the organizations"""

    dataset: Dataset = "wine"
    """the data set, one of the registry's: a table (csv: one file per organization, data.csv_files; bank_marketing:
    bank-full.csv under root), images (mnist, fashion_mnist, cifar10: files under root) or sequences (npz: a file
    under root)"""
    organizations: PositiveInt = 8
    """number of organizations M (Alice is organization 0); csv: one per file"""
    root: str = "data"
    """image datasets and bank_marketing: their root directory; dataset=npz: the .npz file"""
    download: bool = False
    """download a torchvision dataset into root first (needs internet)"""
    image_view: Literal["patch", "masked"] = "patch"
    """what an organization holds of an image: its patch only, or the image with the rest masked"""
    max_train: NonNegativeInt = 0
    """image datasets: use only the first N (shuffled) training images (0: all)"""
    sequence_size: PositiveInt = 2000
    """dataset=sequence_synthetic: number of sequences"""
    split_seed: int = 0
    """seed of the train/test row split, kept fixed across run seeds"""
    test_fraction: OpenUnitInterval = 0.2
    """fraction of rows held out for test"""
    val_fraction: NonNegativeFloat = 0.0
    """fraction of the training rows held out for validation (0: none)"""
    folds: NonNegativeInt = 0
    """K-fold cross-validation: the test rows are fold data.fold of K folds of the split_seed permutation, instead
    of test_fraction (0: off); run each fold 0..K-1"""
    fold: NonNegativeInt = 0
    """with data.folds: which fold is the test split, 0..K-1"""
    bootstrap: bool = False
    """train on as many rows drawn with replacement from the training split (seeded by split_seed; the test rows
    stay apart): ASCII's real-data protocol, 'resampled with replacement'"""
    assignment: dict[str, list[str]] = field(default_factory=dict)
    """explicit columns per organization by name, e.g. {alice: [a, b], bob: [c]}"""
    csv_files: list[str] = field(default_factory=list)
    """dataset=csv: one CSV per organization, Alice's (with the label) first"""
    predict_files: list[str] = field(default_factory=list)
    """set by train.py predict: new people's files, one per organization in csv_files' order (a label optional)"""
    id_column: str = "id"
    """dataset=csv: the shared ID column used to align rows"""
    label_column: str = "label"
    """dataset=csv: the label column in Alice's file"""
    task: Literal["", "classification", "regression"] = ""
    """dataset=csv: classification or regression"""
    categorical: Literal["error", "onehot"] | list[Literal["error", "onehot"]] = field(
        default_factory=lambda: ["error"]
    )
    """dataset=csv: a text column is refused (error) or one-hot encoded on the party's own training rows (onehot);
    one value for all files or one per file"""
    missing: Literal["error", "drop", "impute"] | list[Literal["error", "drop", "impute"]] = field(
        default_factory=lambda: ["error"]
    )
    """dataset=csv: a missing value is refused (error), drops its row from every party before the split (drop), or
    is imputed on the party's own training rows (impute); one value for all files or one per file"""
    synthetic_train: PositiveInt = 1000
    """ascii_blobs* datasets: training rows (the paper: 1000)"""
    synthetic_test: PositiveInt = 100000
    """ascii_blobs* datasets: test rows (the paper: 100000)"""
    module: str | Estimator = ""
    """your own data module for the GAL and ASCII methods, {class_path: my_pkg.MyData, init_args: {...}}: a
    subclass of vcl.datamodules.VerticalDataModule whose setup() sets self.data (data.dataset then only names the
    run)"""

    def __post_init__(self):
        seed_in_range("data.split_seed", self.split_seed)
        if self.folds == 1 or self.fold >= max(self.folds, 1):
            raise VCLInputError(
                f"data.folds={self.folds}, data.fold={self.fold}: use at least 2 folds and a fold in 0..folds-1 "
                "(or data.folds 0 for one test_fraction split)."
            )
        listed(self, "categorical", "missing")
        if self.module:
            self.module = estimator_spec(self.module, "data.module", other="datamodule")
            if not self.module.startswith("datamodule:"):
                self.module = "datamodule:" + self.module.removeprefix("sklearn:")
        if self.val_fraction >= 1 or self.test_fraction + self.val_fraction >= 1:
            raise VCLInputError(
                f"data.test_fraction={self.test_fraction} and data.val_fraction={self.val_fraction} leave no "
                "training rows; keep their sum below 1."
            )
        if self.synthetic_train < 2:
            raise VCLInputError(f"data.synthetic_train={self.synthetic_train}; use at least 2 training rows.")
        if self.dataset != "csv" and (self.categorical != ["error"] or self.missing != ["error"]):
            raise VCLInputError(
                f"data.categorical / data.missing prepare CSV files (dataset=csv); dataset={self.dataset!r} needs "
                "neither, so leave them at error."
            )


@dataclass
class RunGroup:
    """run: how long, which seed, where the numbers are computed"""

    rounds: PositiveInt = 10
    """assistance rounds T (MPDL: iterations of Algorithm 1, at most mpdl.max_iterations)"""
    seed: int = 0
    """run seed: feature split, model initialization, minibatch order"""
    device: str = "auto"
    """cpu, cuda, cuda:N, or auto (cuda when available); cuda with several GPUs spreads organizations"""
    concurrent: bool = True
    """fit same-architecture organizations in one pass (false: one after another)"""
    missing_parties: Literal["fail", "skip"] = "fail"
    """an organization that is down or past transport.deadline: fail (end the run; --resume continues) or skip (GAL,
    AL: leave it out of that round and of later ones; prediction uses the organizations present)"""
    keep_messages: bool = True
    """every party and Alice keep the messages they receive and send beside their checkpoints (parties/<name>/messages/,
    messages/), what `train.py audit` attacks (a gRPC party on its own machine decides in its own config)"""
    keep_rows: NonNegativeInt = 10000
    """the rows kept of each message: one sample of this many where a message has more (the audit scores those rows),
    which bounds the disk at 10^6 rows; 0 keeps every row"""
    audit: bool = True
    """at the run's end, attack what each receiver kept and account each noise's budget (`train.py audit`), into
    results.json's privacy section; needs run.keep_messages"""
    engine: Literal["fast", "trainer"] = "fast"
    """fit engine of torch learners: fast (a device-resident loop) or trainer (Lightning's Trainer)"""
    precision: Literal["32-true", "bf16-mixed", "16-mixed"] = "32-true"
    """numeric precision of torch learners (16-mixed: fp16 with loss scaling), for either engine"""
    accelerator: str = "auto"
    """engine=trainer: Lightning accelerator"""
    devices: str = "1"
    """engine=trainer: Lightning devices (a count, a list, or auto)"""
    strategy: str = "auto"
    """engine=trainer: Lightning strategy, e.g. ddp for one organization on several GPUs"""

    def __post_init__(self):
        seed_in_range("run.seed", self.seed)
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device):
            raise VCLInputError(f"run.device={self.device!r} is not a device; use cpu, cuda, cuda:N or auto.")


@dataclass
class LearnerGroup:
    """learner: each organization's local model and how it is fitted (0 / auto: the paper's value)"""

    model: str | Estimator | list[str | Estimator] = field(default_factory=lambda: ["linear"])
    """local model per organization: linear, mlp, cnn, lstm, gb, svm, gb-svm (GB for the first half, SVM after); for
    ASCII methods a classifier: linear, mlp, tree, forest, logistic, gb, svm; or any scikit-learn estimator, as
    {class_path: sklearn.<module>.<Class>, init_args: {...}} or sklearn:<path>; or your own LightningModule, as
    {class_path: my_pkg.MyNet, init_args: {...}} (built with in_features and out_features); one for all or one each"""
    callbacks: list[Estimator] = field(default_factory=list)
    """run.engine trainer: Lightning callbacks for every GAL-family organization's Trainer, as {class_path,
    init_args}"""
    epochs: NonNegativeInt = 0
    """local training epochs per round (0: the paper's, 100 linear/mlp, 10 cnn/lstm)"""
    lr: NonNegativeFloat = 0.0
    """local learning rate (0: the paper's, 0.1 SGD for linear/mlp/cnn, 1e-3 Adam for lstm)"""
    optimizer: Literal["auto", "sgd", "adam"] = "auto"
    """local optimizer (auto: adam for lstm, sgd otherwise)"""
    momentum: NonNegativeFloat = 0.9
    """local SGD momentum"""
    weight_decay: NonNegativeFloat = 5e-4
    """local weight decay"""
    milestones: list[PositiveInt | Literal["auto"]] = field(default_factory=lambda: ["auto"])
    """epochs at which the local rate is multiplied by gamma ([auto]: [50] for linear/mlp; []: none)"""
    gamma: PositiveFloat = 0.1
    """local learning-rate decay factor"""
    batch_size: NonNegativeInt = 0
    """local batch size (0: the paper's, 1024 linear/mlp, 512 cnn, 8 lstm; at least N: full batch)"""
    shuffle: Literal["rows", "blocks"] = "rows"
    """the order of a fast-engine fit's batches (linear, mlp, cnn without dropout; lstm and own modules keep rows):
    rows, each epoch a fresh permutation of the rows (the papers'); blocks, the rows permuted once per fit, then each
    epoch their contiguous batches in a fresh order (reads in order: far faster on tables larger than the caches)"""
    hidden: list[PositiveInt] = field(default_factory=lambda: [64])
    """hidden widths of the mlp learner"""
    cnn_widths: list[PositiveInt] = field(default_factory=lambda: [64, 128, 256, 512])
    """channel widths of the cnn learner's conv blocks (GAL Table 8)"""
    cnn_last_pool: bool = True
    """cnn learner: max-pool after the last conv block too, as GAL Table 8 (false: only after the others, as the GAL
    authors' code does)"""
    lstm_hidden: PositiveInt = 128
    """hidden size of the lstm learner"""
    dropout: NonNegativeFloat = 0.3
    """dropout after the lstm learner's last step"""
    grad_clip: NonNegativeFloat = 1.0
    """local gradient-norm clip (0: off)"""
    max_depth: NonNegativeInt = 0
    """ASCII tree, forest and gb classifiers: maximum depth (0: unlimited; gb: 3)"""
    n_trees: PositiveInt = 100
    """ASCII forest classifier: number of trees"""

    def __post_init__(self):
        listed(self, "model")
        self.model = [estimator_spec(m, "learner.model", other="module") for m in self.model]
        self.callbacks = [estimator_spec(c, "learner.callbacks", other="callback") for c in self.callbacks]
        if "auto" in self.milestones and self.milestones != ["auto"]:
            raise VCLInputError(f"learner.milestones={self.milestones}; give epoch numbers, [] for none, or [auto].")
        if not self.cnn_widths:
            raise VCLInputError("learner.cnn_widths is empty; give channel counts, e.g. [64, 128, 256, 512].")


@dataclass
class TransportGroup:
    """transport: how the coordinator reaches the parties (where they run, not what they compute)"""

    kind: str = "local"
    """local (every party in this process), ray (one Ray actor per party, each loading only its own data), grpc
    (each organization's party on its own machine, started there with python -m vcl.party, reached over mutual
    TLS), or the class path of a transport of your own (my_pkg.module.MyTransport, a vcl.transport.Transport)"""
    address: str = ""
    """kind=ray: the Ray cluster to join (auto, or host:port); empty starts a local one"""
    party_cpus: PositiveFloat | list[PositiveFloat] = field(default_factory=lambda: [1.0])
    """kind=ray: CPUs per party actor (its torch threads), one for all or one per party"""
    party_gpus: NonNegativeFloat | list[NonNegativeFloat] = field(default_factory=lambda: [0.0])
    """kind=ray: GPUs per party actor (fractions share a GPU), one for all or one per party"""
    party_nodes: str | list[str] = field(default_factory=lambda: [""])
    """kind=ray: a custom Ray resource per party (e.g. node_bob, from `ray start --resources`) that pins its actor to
    the machine holding its data; empty: anywhere"""
    party_dirs: str | list[str] = field(default_factory=lambda: [""])
    """where each party keeps its checkpoints (<dir>/<name>/round-<t>.ckpt, on the machine it runs on), one for all
    or one per party; empty: <out>/parties"""

    addresses: dict[str, str] = field(default_factory=dict)
    """kind=grpc: each party's host:port by its name, e.g. {alice: a.example.org:50051, bob: b.example.org:50052}"""
    tls_ca: str = ""
    """kind=grpc: the federation CA's certificate (PEM), which every party's certificate must be signed by"""
    tls_cert: str = ""
    """kind=grpc: the coordinator's certificate (PEM); it names the organization the parties answer"""
    tls_key: str = ""
    """kind=grpc: the coordinator's private key (PEM), kept on its machine"""
    deadline: PositiveFloat = 3600.0
    """kind=grpc: seconds a party may take to answer one request before the run stops"""
    retries: NonNegativeInt = 3
    """kind=grpc: tries again when a party cannot be reached before a request left (never after)"""
    max_message_mb: PositiveFloat = 512.0
    """kind=grpc: the largest frame (a message, all its pieces) sent or accepted, in MiB (the parties have their own)"""
    chunk_mb: PositiveFloat = 4.0
    """kind=grpc: frames cross as streams of pieces of at most this many MiB (within each party's chunk_mb)"""

    def __post_init__(self):
        listed(self, "party_cpus", "party_gpus", "party_nodes", "party_dirs")
        if self.kind not in TRANSPORTS and not CLASS_PATH.match(self.kind):
            raise VCLInputError(
                f"transport.kind={self.kind!r} is no transport; use {', '.join(TRANSPORTS)}, or the class path of "
                "your own (my_pkg.module.MyTransport)."
            )
