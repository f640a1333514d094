"""Run configuration: typed option groups, read by jsonargparse from YAML files and command-line flags.

A run is one :class:`RunConfig`: the method, the methods compared with it, the run directory, and one group
of options per concern (``data``, ``run``, ``learner``, ``transport``) and per method family (``gal``,
``ascii``, ``dc``, ``mpdl``). In YAML the groups nest (``gal: {weights: bag}``); on the command line they
are dotted (``--gal.weights bag``). Each option's type says what it accepts (a ``Literal`` lists the
choices, ``PositiveInt`` and friends bound numbers) and its docstring is its help, so ``train.py --help``
documents every option and ``--print_config`` writes a config that reproduces the run. What a type cannot
say is checked in the group's ``__post_init__`` (one option against another) or, where it needs the data,
when the data are loaded. Precedence: defaults < ``--config FILE`` < the flags after it.

This module imports no torch: ``train.py --help`` needs none.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Union

from jsonargparse.typing import NonNegativeFloat, NonNegativeInt, OpenUnitInterval, PositiveFloat, PositiveInt

from vcl.errors import VCLInputError, regular_file
from vcl.registry import METHODS, family_of

Method = Literal[tuple(METHODS)]  # every method in the registry (vcl/registry.py)
Categorical = Literal["error", "onehot"]
Missing = Literal["error", "drop", "impute"]
LocalLoss = Literal["auto", "l1", "l1.5", "l2", "l4"]
# a scikit-learn estimator named in a config: {class_path: sklearn.<module>.<Class>, init_args: {...}} (plain data;
# nothing is imported here, and only scikit-learn classes ever are: vcl.models.sklearn)
Estimator = dict[str, Any]
# Where parties run and how a run is shown, not what it computes: a run may resume with other values.
NOT_IDENTITY = (
    "out", "compare", "run.rounds", "run.device", "run.concurrent", "run.engine", "data.download",
    "gal.early_stop_eta", "transport",
)  # fmt: skip


# PositiveInt and friends bound numbers when jsonargparse parses (a dataclass built in code holds plain numbers)


@dataclass
class DataGroup:
    """data: which rows and features, and how they are split among the organizations"""

    dataset: str = "wine"
    """tabular: wine, iris, breast_cancer, diabetes, digits, blob, boston, csv, (ASCII) digits_halves, ascii_blobs,
    ascii_blobs20, ascii_blobs_redundant, (DC) dc_artificial, bank_marketing (bank-full.csv under root); images:
    mnist, fashion_mnist, cifar10 (files under root), mnist_subset, digits_image; sequences: sequence_synthetic, npz"""
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
    assignment: dict[str, list[str]] = field(default_factory=dict)
    """explicit columns per organization by name, e.g. {alice: [a, b], bob: [c]}"""
    csv_files: list[str] = field(default_factory=list)
    """dataset=csv: one CSV per organization, Alice's (with the label) first"""
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

    kind: Literal["local", "ray"] = "local"
    """local (every party in this process) or ray (one Ray actor per party, each loading only its own data)"""
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

    def __post_init__(self):
        listed(self, "party_cpus", "party_gpus", "party_nodes", "party_dirs")


@dataclass
class GALGroup:
    """gal: Gradient Assisted Learning and its baselines (alone, joint, al, late, interm)"""

    task_loss: Literal["auto", "ce", "l1", "mse"] = "auto"
    """Alice's loss L1: ce (classification), l1 or mse (regression); auto: ce / l1"""
    local_loss: LocalLoss | list[LocalLoss] = field(default_factory=lambda: ["auto"])
    """residual loss per organization (auto: l1 for diabetes, boston and an l1 task loss, l2 otherwise); one for all
    or one per organization"""
    weights: Literal["learned", "bag", "last"] = "learned"
    """assistance weights: learned (on the simplex), bag (plain average), last"""
    eta: Literal["linesearch", "constant"] = "linesearch"
    """assisted learning rate: linesearch (L-BFGS) or constant"""
    eta_value: float = 1.0
    """the constant rate (eta=constant), or the line search's start"""
    eta_cap: NonNegativeFloat = 0.0
    """the authors' eta = min(|eta|, cap); 0 follows the paper (no cap)"""
    early_stop_eta: NonNegativeFloat = 0.0
    """stop when |eta| falls below this (0: off)"""
    al_mode: Literal["chained", "authors"] = "chained"
    """AL baseline: chained (each organization fits the residual the previous one left) or authors (all fit the
    round's residual, the last one is kept)"""
    dms: bool = False
    """Deep Model Sharing: one feature extractor per organization, one head per round"""
    baseline_epochs: NonNegativeInt = 0
    """epochs of the one-shot centralized baselines late and interm (0: learner.epochs)"""
    late_fusion: Literal["mean", "sum"] = "mean"
    """late baseline: mean (the organizations' outputs averaged, as the GAL authors' code does; it gives the paper's
    Late figures) or sum (added, as the paper's text describes it)"""
    privacy: Literal["none", "dp", "ip"] = "none"
    """privacy on the residuals Alice sends: none, dp (Laplace), ip (interval privacy)"""
    privacy_alpha: PositiveFloat = 1.0
    """Laplace mechanism's alpha: noise scale (b - a)/alpha"""
    privacy_secret: NonNegativeInt = 0
    """Alice's own seed of the privacy noise (0: fresh from the operating system, kept in her checkpoint); the
    parties' copy of the config never holds it"""
    privacy_scope: Literal["others", "all"] = "others"
    """who fits the perturbed residual: others (Alice fits her own model on the clean one) or all (Alice's own fit uses
    the same perturbed broadcast, as in the authors' code); weights and line search stay clean"""
    noise_sigma: NonNegativeFloat = 0.0
    """Gaussian noise sigma on the outputs of noisy_organizations (training and prediction)"""
    noisy_organizations: list[NonNegativeInt | Literal["half", "last_half"]] = field(default_factory=lambda: ["half"])
    """organizations whose outputs get noise_sigma noise: indices, half (M - M//2 of them drawn at random from the run
    seed, as the paper) or last_half (M//2 .. M-1, as the authors' code)"""
    noninformative_organizations: list[NonNegativeInt | Literal["half", "last_half"]] = field(default_factory=list)
    """organizations whose inputs are replaced by N(0, 1) noise: indices, half (random, as noisy_organizations) or
    last_half (M//2 .. M-1)"""

    def __post_init__(self):
        listed(self, "local_loss")


@dataclass
class ASCIIGroup:
    """ascii: assisted learning by ignorance interchange (ascii, ascii_simple, ascii_random, ensemble_adaboost)"""

    stop: Literal["alpha", "cv"] = "alpha"
    """stop criterion: alpha (an agent's model weight alpha <= 0, the paper's default) or cv (validation accuracy
    stops improving; needs data.val_fraction > 0)"""
    alpha: Literal["exact", "paper"] = "exact"
    """model weight of the agents after the first of a round: exact (the minimizer of the round's joint exponential
    loss, eq. 6, given the scores received; no alphas are sent) or paper (eqs 11/13 as printed)"""
    patience: PositiveInt = 1
    """stop=cv: rounds without a better validation accuracy before stopping"""
    resample: bool = False
    """fit a classifier whose fit takes no sample_weight on a weighted resample instead of refusing it"""


@dataclass
class DCGroup:
    """dc: Data Collaboration analysis (dc_smote, dc_tsvd, dc_rand, dc_raw) and its references (centralized, local)"""

    row_groups: PositiveInt = 2
    """c, groups of training rows (horizontal split)"""
    column_groups: PositiveInt = 2
    """d, groups of columns (vertical split); party (i, j) holds rows i, columns j"""
    feature_split: Literal["alternate", "random", "type", "named"] = "alternate"
    """columns to groups: alternate (k mod d), random (seeded), type (continuous, categorical), named (from
    data.assignment)"""
    public_rows: NonNegativeInt = 100
    """p, unlabeled public rows X_pub held out from the data (the SMOTE anchors' source)"""
    standardize: bool = True
    """z-score features with training statistics (false: raw units)"""
    anchor_rows: PositiveInt = 1000
    """r, anchor rows (dc_raw uses the training rows)"""
    reduction: str | Estimator = "pca"
    """worker-side reduction f_ij: pca, tsvd, identity, or a scikit-learn transformer ({class_path, init_args} or
    sklearn:<path>)"""
    dim: int = 5
    """reduced dimension per party; <= 0 means the party's columns + dim (0: keep all)"""
    collab_dim: NonNegativeInt = 0
    """collaboration dimension m-hat; 0: the summed reduced dimensions of a row group"""
    central: str | Estimator = "ridge"
    """master's analysis h: ridge (one-hot targets), gb, or a scikit-learn estimator ({class_path, init_args} or
    sklearn:<path>)"""
    interpretable: str | Estimator = "tree"
    """worker-side interpretable model t_i: tree, gb, or a scikit-learn classifier ({class_path, init_args} or
    sklearn:<path>)"""
    tree_splits: PositiveInt = 5
    """maximum number of branch-node splits of the tree"""
    smote_k: PositiveInt = 25
    """SMOTE neighbours k (at most public_rows - 1)"""
    smote_alpha: PositiveFloat = 1.5
    """SMOTE coefficients c ~ U(0, alpha); 1.5 keeps the variance"""
    tsvd_rank: PositiveInt = 3
    """TSVD: rank of each party's truncated SVD"""
    tsvd_delta: NonNegativeFloat = 0.1
    """TSVD: perturbation delta of the N(0, 1) noise added to it"""
    top_t: PositiveInt = 3
    """t of Dice_t, the top-t essential features compared with Centralized's"""

    def __post_init__(self):
        for key in ("reduction", "central", "interpretable"):
            setattr(self, key, estimator_spec(getattr(self, key), f"dc.{key}"))


@dataclass
class MPDLGroup:
    """mpdl: multi-party dual learning (mpdl) and its federated-transfer-learning reference (ftl)"""

    gamma: OpenUnitInterval = 0.1
    """co-occurrence probability gamma (D_C = N[0, g], D_B = N(g, 0.5+g/2], D_A the rest)"""
    epsilon: NonNegativeFloat = 0.5
    """privacy budget epsilon of the DP layer h0 (0: no privacy, epsilon = inf)"""
    lam: NonNegativeFloat = 0.01
    """lambda, the Lagrange weight of the duality regularizer (eq. 11; 0 turns it off)"""
    folds: int = 5
    """K, folds of the co-occurring rows for dual cross-validation (Algorithm 1; at least 2)"""
    threshold: float = 0.15
    """T, stop when V_D - V_C > T on the validation fold"""
    max_iterations: PositiveInt = 2
    """m, maximum iterations of Algorithm 1 (one round each; capped by run.rounds)"""
    dual_epochs: PositiveInt = 10
    """epochs of dual learning per iteration (FTL: autoencoder epochs)"""
    central_epochs: PositiveInt = 20
    """epochs of each central (split-network) model"""
    lr: PositiveFloat = 0.1
    """SGD learning rate of the dual, central and FTL models"""
    batch_size: PositiveInt = 32
    """minibatch size of dual and central training"""
    hidden: NonNegativeInt = 0
    """hidden width of the dual MLPs (0: (in + out)/2)"""
    paillier: bool = False
    """encrypt the density differences with Paillier (slow; false: plaintext)"""
    key_bits: PositiveInt = 1024
    """Paillier modulus bits"""
    psi_bits: Literal[1024, 2048] = 2048
    """MODP group of the private set intersection"""
    max_rows: NonNegativeInt = 0
    """use only the first N rows of a (shuffled) dataset (0: all)"""
    ftl_dim: NonNegativeInt = 0
    """FTL reference: common code dimension (0: min(64, min(d_A, d_B)/2))"""
    central: Literal["mlp", "cnn"] = "mlp"
    """central model at C: mlp, or cnn (images: the paper's CNN split at conv1; CIFAR-10's net for colour)"""
    dual_arch: Literal["mlp", "cnn"] = "mlp"
    """dual models f, g: mlp (the paper), or cnn (images: conv trunk + linear)"""
    dual_clip: NonNegativeFloat = 0.0
    """clip each dual model's gradient norm to this before its SGD step (0: off)"""
    secret_a: NonNegativeInt = 0
    """party A's own seed of its h0 noise (0: fresh from the operating system, kept in A's checkpoint); no other
    party's copy of the config holds it"""
    secret_b: NonNegativeInt = 0
    """party B's own seed of its h0 noise and its PSI shuffle (0: fresh from the operating system, kept in B's
    checkpoint); no other party's copy of the config holds it"""
    dp_noise: Literal["per_row", "offset_no_dp"] = "per_row"
    """h0 noise: per_row (Laplace d/epsilon on every entry: epsilon-DP per row) or offset_no_dp (the paper's eq. 14
    literally: one shift per feature; no privacy guarantee)"""

    def __post_init__(self):
        if self.folds < 2:
            raise VCLInputError(f"mpdl.folds={self.folds}; use at least 2 folds (the paper: 5).")


GROUPS = {
    "data": DataGroup,
    "run": RunGroup,
    "learner": LearnerGroup,
    "transport": TransportGroup,
    "gal": GALGroup,
    "ascii": ASCIIGroup,
    "dc": DCGroup,
    "mpdl": MPDLGroup,
}


@dataclass
class RunConfig:
    """a vertical collaborative learning run"""

    method: Method = "gal"
    """the method to run (GAL family: gal, alone, joint, al, late, interm; ASCII: ascii, ascii_simple, ascii_random,
    ensemble_adaboost, single, oracle; DC: dc_smote, dc_tsvd, dc_rand, dc_raw, centralized, local; MPDL: mpdl, ftl)"""
    compare: Method | list[Method] | None = None
    """methods of the same family also run, their metrics beside the main one's ([] for none; unset: the
    family's reference of one party alone: alone beside GAL, single beside ASCII, local beside DC, ftl beside MPDL)"""
    out: str = ""
    """run directory (default runs/<method>_<dataset>_M<M>_seed<seed>; DC: _<c>x<d>_)"""
    data: DataGroup = field(default_factory=DataGroup)
    run: RunGroup = field(default_factory=RunGroup)
    learner: LearnerGroup = field(default_factory=LearnerGroup)
    transport: TransportGroup = field(default_factory=TransportGroup)
    gal: GALGroup = field(default_factory=GALGroup)
    ascii: ASCIIGroup = field(default_factory=ASCIIGroup)
    dc: DCGroup = field(default_factory=DCGroup)
    mpdl: MPDLGroup = field(default_factory=MPDLGroup)

    def __post_init__(self):
        for key, value in flatten(dataclasses.asdict(self)).items():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, float) and not (math.isfinite(v) and abs(v) <= FLOAT32_MAX):
                    raise VCLInputError(
                        f"{key}={v} is not a finite number within float32's range (up to 3.4e38); give a smaller one."
                    )
                if isinstance(v, float) and 0 < abs(v) < FLOAT32_TINY:
                    raise VCLInputError(f"{key}={v} is too close to 0 for float32 (below 1.2e-38); give a larger one.")
        if self.compare is not None:
            listed(self, "compare")
        if self.ascii.stop == "cv" and self.data.val_fraction <= 0:
            raise VCLInputError(
                "ascii.stop=cv needs a validation split; set data.val_fraction (the paper holds out 0.5)."
            )
        if "dc_smote" in (self.method, *(self.compare or ())) and not 1 <= self.dc.smote_k <= self.dc.public_rows - 1:
            raise VCLInputError(
                f"dc.smote_k={self.dc.smote_k} with dc.public_rows={self.dc.public_rows}; "
                "use 1 <= dc.smote_k <= dc.public_rows - 1."
            )

    # --- loading ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> RunConfig:
        """A config from nested groups (``{"gal": {"weights": "bag"}}``), dotted keys (``{"gal.weights": "bag"}``)
        or both; what is not given keeps its default. Types are checked as the command line checks them."""
        return from_namespace(parse_object(nest(values), source))

    @classmethod
    def from_yaml(cls, path: str | Path) -> RunConfig:
        return cls.from_dict(read_yaml(path), source=str(path))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def flat(self) -> dict:
        """Every option under its dotted name (``gal.weights``)."""
        return flatten(self.to_dict())

    @property
    def run_dir(self) -> Path:
        if family_of(self.method) == "DC":
            parties = f"{self.dc.row_groups}x{self.dc.column_groups}"
        else:
            parties = f"M{self.data.organizations}"
        dataset = self.data.dataset
        if self.data.module:  # the user's data module's class name
            dataset = self.data.module.partition("{")[0].rpartition(".")[2]
        return Path(self.out or f"runs/{self.method}_{dataset}_{parties}_seed{self.run.seed}")

    def identity(self) -> dict:
        """The settings a resumed run must share with its checkpoint (all but where/how long/how shown)."""
        return {
            k: v
            for k, v in self.flat().items()
            if not any(k == skip or k.startswith(skip + ".") for skip in NOT_IDENTITY)
        }


# each party's own seeds, and who holds them (None: the coordinator, Alice in GAL); every other party's copy of the
# config has them zeroed
SECRETS = {"gal.privacy_secret": None, "mpdl.secret_a": "a", "mpdl.secret_b": "b"}


def party_copy(settings: dict, party: str | None = None) -> dict:
    """The config (as ``RunConfig.to_dict`` gives it) that ``party`` may hold: every secret but its own zeroed
    (``party=None``: a copy that holds none)."""
    settings = {k: dict(v) if isinstance(v, dict) else v for k, v in settings.items()}
    for key, holder in SECRETS.items():
        group, _, name = key.partition(".")
        if holder is None or holder != party:
            settings[group][name] = 0
    return settings


def config_integers(settings) -> tuple[int, ...]:
    """Every whole number in a config (as ``to_dict`` gives it), once, in order: the seeds a party could derive
    anything from (what an attack on protective noise tries)."""
    found: list[int] = []
    stack = [settings]
    while stack:
        value = stack.pop(0)
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            found.append(value)
    return tuple(dict.fromkeys(found))


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


def flatten(values: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in values.items():
        if k in GROUPS and not prefix and isinstance(v, dict):
            out.update(flatten(v, f"{k}."))
        else:
            out[prefix + k] = v
    return out


def nest(values: dict) -> dict:
    """Dotted keys into their groups (``gal.weights`` → ``{"gal": {"weights": ...}}``), merged with nested ones."""
    out: dict = {}
    for key, value in values.items():
        if isinstance(value, dict) and key in GROUPS:
            out.setdefault(key, {}).update(value)
        elif "." in key:
            group, name = key.split(".", 1)
            out.setdefault(group, {})[name] = value
        else:
            out[key] = value
    return out


def read_yaml(path: str | Path) -> dict:
    import yaml

    p = Path(path)
    regular_file(p, "config file", "pass a YAML file, e.g. one from configs/")
    try:
        values = bounded_yaml(p.read_text(encoding="utf-8"), f"config file {p}")
    except UnicodeDecodeError:
        raise VCLInputError(f"config file {p} is not UTF-8 text; save it as UTF-8.") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or type(err).__name__
        where = f"line {mark.line + 1}: {problem}" if mark is not None else problem
        raise VCLInputError(f"config file {p} is not valid YAML ({where}); fix its syntax.") from None
    if values is None:
        raise VCLInputError(f"config file {p} holds no options; write some (see configs/) or leave --config out.")
    if not isinstance(values, dict):
        raise VCLInputError(f"config file {p} must hold a mapping of option: value.")
    return values


YAML_VALUES = 100_000  # the most values a config or a flag's YAML may hold once its aliases (*name) are expanded


def bounded_yaml(text: str, source: str, loader=None, load=None):
    """``text`` as YAML values (``yaml.SafeLoader`` unless ``loader``; ``load(text)`` builds them), refused in one
    sentence when it holds, or through aliases (``&name`` ... ``*name``) would expand to, more than
    :data:`YAML_VALUES` values, or refers to itself: such a value would take the run's memory before any check."""
    import yaml

    node = yaml.compose(text, Loader=loader or yaml.SafeLoader)
    if node is not None and _expanded_size(node) > YAML_VALUES:
        raise VCLInputError(
            f"{source} expands to more than {YAML_VALUES} values or refers to itself through YAML aliases "
            "(&name ... *name); write the options out plainly."
        )
    twice = _repeated_key(node) if node is not None else None
    if twice is not None:
        raise VCLInputError(f"{source} gives {twice.value!r} twice (line {twice.start_mark.line + 1}); keep one.")
    return yaml.safe_load(text) if load is None else load(text)


def _repeated_key(root):
    """The first key node that repeats a key of its mapping (YAML keeps the last silently), or None."""
    import yaml

    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value in keys:
                    return key
                keys.add(key.value if isinstance(key, yaml.ScalarNode) else id(key))
        stack += _yaml_children(node)
    return None


def _yaml_children(node) -> list:
    """A YAML node's child nodes: a sequence's items, a mapping's keys and values (a scalar has none)."""
    if isinstance(node.value, list):
        return [c for item in node.value for c in (item if isinstance(item, tuple) else (item,))]
    return []


def _expanded_size(root) -> float:
    """How many values the YAML node graph ``root`` stands for with every alias expanded (inf if it refers to
    itself); counted once per node, without expanding, and stopped early past :data:`YAML_VALUES`."""

    sizes: dict[int, float] = {}
    open_nodes: set[int] = set()  # being counted: meeting one again below itself is a cycle
    stack = [(root, False)]
    while stack:
        node, counted = stack.pop()
        if counted:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in _yaml_children(node))
            if sizes[id(node)] > YAML_VALUES:
                return sizes[id(node)]
            open_nodes.discard(id(node))
            continue
        if id(node) in sizes:
            continue
        open_nodes.add(id(node))
        stack.append((node, True))
        for c in _yaml_children(node):
            if id(c) in open_nodes:
                return float("inf")
            if id(c) not in sizes:
                stack.append((c, False))
    return sizes[id(root)]


def _flag_yaml(value: str):
    """jsonargparse's YAML reading of a flag's value or a --config file, bounded as :func:`bounded_yaml`."""
    from jsonargparse._loaders_dumpers import get_yaml_default_loader, yaml_load

    return bounded_yaml(value, "a YAML value", loader=get_yaml_default_loader(), load=yaml_load)


# --- the parser (jsonargparse) ------------------------------------------------------------------------------


@lru_cache(maxsize=2)
def parser(documented: bool = False):
    """The command line: every option of :class:`RunConfig`, ``--config`` and ``--print_config``; train.py takes
    its switches (``--resume``, ``--overwrite``, ``--quiet``) off first. ``documented``: each option's help from
    its docstring (for ``--help``; reading the docstrings is a tenth of a second that a run does not need)."""
    import jsonargparse
    import yaml
    from jsonargparse import ActionConfigFile, ArgumentParser

    jsonargparse.set_parsing_settings(docstring_parse_attribute_docstrings=documented)
    jsonargparse.set_loader("vcl_yaml", _flag_yaml, exceptions=(yaml.YAMLError,))
    p = ArgumentParser(
        parser_mode="vcl_yaml",
        prog="train.py",
        description="Train a vertical collaborative learning method (default: GAL on wine, M=8).",
        epilog="Switches (not part of a config): --resume continues the run in --out from its last checkpoint; "
        "--overwrite starts afresh in an --out that holds a run (its outputs are replaced once the new run completes; "
        "other files are kept); "
        "--quiet prints only the final summary.",
        exit_on_error=False,
    )
    p.add_argument(
        "--config", action=ActionConfigFile, help="a YAML file of options (see configs/); flags after it override it"
    )
    p.add_class_arguments(RunConfig, fail_untyped=True, sub_configs=False)
    return p


@lru_cache(maxsize=1)
def _defaults():
    return parser().get_defaults()


def parse_object(values: dict, source: str):
    """Nested values checked against the options' types, defaults filled in: a jsonargparse Namespace."""
    from argparse import ArgumentError

    try:  # onto a copy of the defaults parsed once: 40 % less time than parsing them again each call
        return parser().parse_object(values, namespace=_defaults().clone(), defaults=False)
    except ArgumentError as err:
        raise VCLInputError(explain(str(err), source)) from None


def parse_args(argv: list[str]) -> RunConfig:
    """The command line parsed, or a :class:`VCLInputError` naming the flag and the fix."""
    from argparse import ArgumentError

    argv = _gather_lists(argv)
    for k, arg in enumerate(argv):  # a config file's own problems, said as for one loaded in code
        if arg == "--config" and k + 1 < len(argv) or arg.startswith("--config="):
            path = argv[k + 1] if arg == "--config" else arg.split("=", 1)[1]
            parse_object(nest(read_yaml(path)), path)
    try:
        documented = any(a in ("-h", "--help") or a.startswith("--print_config=comments") for a in argv)
        ns = parser(documented).parse_args(argv)
    except ArgumentError as err:
        raise VCLInputError(explain(str(err), "command line")) from None
    return from_namespace(ns)


def _list_options() -> dict[str, bool]:
    """Options that hold a list, by flag: True where a single value is a list too (``list[X]``), False where it
    means one value for all (``X | list[X]``)."""
    import typing

    out = {}
    for prefix, cls in [("", RunConfig), *((f"{g}.", c) for g, c in GROUPS.items())]:
        for name, hint in typing.get_type_hints(cls).items():
            args = typing.get_args(hint)
            if typing.get_origin(hint) is list:
                out[f"--{prefix}{name}"] = True
            elif typing.get_origin(hint) in (Union, types.UnionType) and list in map(typing.get_origin, args):
                out[f"--{prefix}{name}"] = False
    return out


def _gather_lists(argv: list[str]) -> list[str]:
    """``--compare alone late`` as ``--compare '[alone, late]'`` and a bare ``--compare`` as ``[]``: list options
    take the values after them, up to the next flag, as the old command line did."""
    import json

    lists, out, k = _list_options(), [], 0
    while k < len(argv):
        arg = argv[k]
        out.append(arg)
        k += 1
        if arg not in lists:
            continue
        values = []
        while k < len(argv) and not argv[k].startswith("--"):
            values.append(argv[k])
            k += 1
        if len(values) == 1 and (values[0].lstrip().startswith("[") or not lists[arg]):
            out.append(values[0])  # a list written out, or one value for all
        else:
            out.append("[" + ", ".join(_scalar(v, json) for v in values) + "]")
    return out


def _scalar(text: str, json) -> str:
    """A command-line value inside a YAML list: numbers as written, anything else quoted (``#``, ``:`` and
    ``yes`` stay text)."""
    try:
        float(text)
        return text
    except ValueError:
        return json.dumps(text)


def from_namespace(ns) -> RunConfig:
    values = _plain(ns.as_dict())
    groups = {k: GROUPS[k](**values.pop(k)) for k in GROUPS}
    return RunConfig(**{k: values[k] for k in ("method", "compare", "out")}, **groups)


def _plain(value):
    """Bounded numbers back to plain ones (a checkpoint holds only built-in types)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def explain(message: str, source: str) -> str:
    """jsonargparse's error as one sentence that names the option and what it takes."""
    first = message.strip().splitlines()[0].strip()
    key = re.search(r'[Kk]ey "([^"]+)"', message)
    if key:
        name = key.group(1)
        if name in GROUPS:
            return f"{source}: {name} is a group of options; set them one by one, e.g. --{name}.<option>."
        got = (
            re.search(r"(?:Got|Given) value: (.+)", message)
            or re.search(r": (\S+) does not conform", message)
            or re.search(r"invalid literal for \w+\(\) with base 10: '(.*)'", message)
        )
        value = f"={got.group(1).strip()}" if got else ""
        wants = _wants(name)
        if value in ("=True", "=False", "=None") and wants.endswith("text"):
            wants += " (quote it: YAML reads yes, no and null as true, false and null)"
        return f"{source}: {name}{value} is not valid; {wants}."
    for pattern in (
        r"Group '(\w+)' does not accept (?:option|nested key) '([^']+)'",
        r"Option '([^']+)' is not accepted",
        r"nrecognized arguments: --(\S+)",
    ):
        found = re.search(pattern, first)
        if found:
            return _unknown(source, ".".join(found.groups()))
    return f"{source}: {first.rstrip('.')}; see `python train.py --help` for the options."


def _unknown(source: str, name: str) -> str:
    """An unknown option, with the option of that name in its group when there is one (``seed`` → ``run.seed``,
    ``dc_dim`` → ``dc.dim``); a name with characters that do not show (a zero-width space) is shown escaped."""
    import unicodedata

    if any(unicodedata.category(c) in ("Cc", "Cf", "Cn", "Co", "Zl", "Zp", "Zs") for c in name):
        return f"{source}: unknown option {ascii(name)} (it holds characters that do not show); retype it."
    last = name.rsplit(".", 1)[-1]
    for group, cls in GROUPS.items():
        for f in dataclasses.fields(cls):
            if last in (f.name, f"{group}_{f.name}"):
                return f"{source}: unknown option {name}; did you mean {group}.{f.name}?"
    return f"{source}: unknown option {name}; see `python train.py --help` for the options."


def _wants(name: str) -> str:
    """What an option takes, from its type."""
    import typing

    cls, parts = RunConfig, name.split(".")
    for part in parts[:-1]:
        cls = GROUPS.get(part, cls)
    hint = typing.get_type_hints(cls).get(parts[-1])
    return "it takes " + _describe(hint) if hint is not None else "see `python train.py --help` for what it takes"


def _describe(hint) -> str:
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return "one of " + ", ".join(str(a) if a != "" else "'' (empty)" for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is list:
        return f"a list of {_describe(args[0]) if args else 'values'}"
    if origin is dict:
        return "a mapping such as {name: [column, ...]}"
    names = {
        "PositiveInt": "a whole number > 0",
        "NonNegativeInt": "a whole number >= 0",
        "PositiveFloat": "a number > 0",
        "NonNegativeFloat": "a number >= 0",
        "OpenUnitInterval": "a number strictly between 0 and 1",
        "int": "a whole number",
        "float": "a number",
        "bool": "true or false",
        "str": "text",
    }
    return names.get(getattr(hint, "__name__", ""), str(hint))
