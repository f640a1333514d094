"""The option groups of the method families (``gal``, ``ascii``, ``dc``, ``mpdl``), beside the run's own in
:mod:`vcl.config.groups`: each option's type says what it takes and its docstring is its help; a family's options
class inherits its group, so an option is spelled once. Imports no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jsonargparse.typing import NonNegativeFloat, NonNegativeInt, OpenUnitInterval, PositiveFloat, PositiveInt

from vcl.config.groups import (
    DataGroup,
    Estimator,
    LearnerGroup,
    LocalLoss,
    RunGroup,
    TransportGroup,
    estimator_spec,
    listed,
)
from vcl.errors import VCLInputError


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
    """late baseline: mean (the organizations' outputs averaged, as the GAL authors' code does) or sum (added, as the
    paper's text describes it); neither reproduces the paper's Late regression figures (docs/design.md)"""
    privacy: Literal["none", "dp", "dp_residuals", "residual_laplace", "ip"] = "none"
    """dp (Alice's labels privatized once) or dp_residuals (each round's bounded residual plus Laplace): DP for one
    person's label; residual_laplace (the paper's) or ip (interval privacy): no DP guarantee (docs/gal.md)"""
    privacy_epsilon: PositiveFloat = 1.0
    """dp, dp_residuals: the run's epsilon for one person's label, at delta 1e-5"""
    label_bounds: list[float] = field(default_factory=list)
    """dp on a regression task: the public [low, high] Alice's targets are clipped to; dp_residuals: its midpoint is
    the public F0 (never read from the data)"""
    privacy_alpha: PositiveFloat = 1.0
    """residual_laplace's alpha: noise scale (b - a)/alpha"""
    privacy_secret: NonNegativeInt = 0
    """Alice's own seed of her noise (0: fresh from the OS, kept in her checkpoint; no other party's config holds it)"""
    privacy_scope: Literal["others", "all"] = "others"
    """who fits the perturbed residual: others (Alice fits her own model on the clean one) or all (Alice's own fit uses
    the same perturbed broadcast, as in the authors' code); weights and line search stay clean"""
    privacy_draws: Literal["per_round", "repeated"] = "per_round"
    """per_round: a new noise draw from Alice's secret every round; repeated: the same draw every round, scaled to
    that round's bounds, as the GAL authors' code does (it reseeds numpy's generator whenever it makes a data loader;
    this decides the paper's DP figures, docs/gal.md)"""
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
    """master's analysis h: ridge (one-hot targets), gb, xgboost (DC's Tables 2-5), or a scikit-learn estimator
    ({class_path, init_args} or sklearn:<path>)"""
    interpretable: str | Estimator = "tree"
    """worker-side interpretable model t_i: tree, gb, xgboost (DC's Tables 2-5), or a scikit-learn classifier
    ({class_path, init_args} or sklearn:<path>)"""
    tree_splits: PositiveInt = 5
    """maximum number of branch-node splits of the tree"""
    smote_k: PositiveInt = 25
    """SMOTE neighbours k (at most public_rows - 1)"""
    smote_alpha: PositiveFloat = 1.5
    """SMOTE coefficients c ~ U(0, alpha); 1.5 keeps the variance"""
    tsvd_rank: PositiveInt = 3
    """TSVD: rank of each party's truncated SVD"""
    rand_spread: PositiveFloat = 1.0
    """rand: the width of the uniform anchors' range about its middle, in units of each feature's [min, max] (1:
    the paper's Section 3.1)"""
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
    max_rows: NonNegativeInt = 0
    """use only the first N rows of a (shuffled) dataset (0: all)"""
    kde_rows: NonNegativeInt = 0
    """each party's density estimate (the duality regularizer's P) over this many of its own rows, drawn with its
    secret (0: all of them, the paper's; a sample cuts each step's kernel by N / kde_rows)"""
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


GROUPS = {  # every group of a run's config, by its name
    "data": DataGroup,
    "run": RunGroup,
    "learner": LearnerGroup,
    "transport": TransportGroup,
    "gal": GALGroup,
    "ascii": ASCIIGroup,
    "dc": DCGroup,
    "mpdl": MPDLGroup,
}
