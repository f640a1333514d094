"""Run configuration: one flat dataclass, loaded from YAML and overridden from the command line.

Every field carries its help text, so ``train.py --help`` documents every option and an unknown key
in a YAML file is refused by name. Precedence: defaults < ``--config FILE`` < command-line flags.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vcl.errors import VCLInputError

ASCII_METHODS = ("ascii", "ascii_simple", "ascii_random", "ensemble_adaboost", "single", "oracle")
DC_METHODS = ("dc_smote", "dc_tsvd", "dc_rand", "dc_raw", "centralized", "local")
MPDL_METHODS = ("mpdl", "ftl")
# Where parties run, not what they compute: a run may resume on another transport.
RUNTIME = ("transport", "ray_address", "party_cpus", "party_gpus", "party_nodes", "party_dirs")
METHODS = ("gal", "alone", "joint", "al", "late", "interm", *ASCII_METHODS, *DC_METHODS, *MPDL_METHODS)


def _f(default, help: str, **kw):
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: json.loads(json.dumps(d)), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class RunConfig:
    method: str = _f("gal", f"protocol to run: {', '.join(METHODS)}")
    dataset: str = _f(
        "wine",
        "tabular: wine, iris, breast_cancer, diabetes, digits, blob, boston, csv, (ASCII) digits_halves, "
        "ascii_blobs, ascii_blobs20, ascii_blobs_redundant, (DC) dc_artificial, bank_marketing (UCI bank-full.csv "
        "under data_root); images: mnist, fashion_mnist, "
        "cifar10 (files under data_root), mnist_subset, digits_image; sequences: sequence_synthetic, npz",
    )
    organizations: int = _f(8, "number of organizations M (Alice is organization 0); ignored for csv")
    data_root: str = _f("data", "image datasets and bank_marketing: their root directory; dataset=npz: the .npz file")
    download: bool = _f(False, "download a torchvision dataset into data_root first (needs internet)")
    image_view: str = _f("patch", "what an organization holds of an image: patch (its patch only) or masked")
    max_train: int = _f(0, "image datasets: use only the first N (shuffled) training images (0: all)")
    sequence_size: int = _f(2000, "dataset=sequence_synthetic: number of sequences")
    rounds: int = _f(10, "assistance rounds T")
    seed: int = _f(0, "run seed: feature split and model initialization")
    split_seed: int = _f(0, "seed of the train/test row split, kept fixed across run seeds")
    test_fraction: float = _f(0.2, "fraction of rows held out for test")
    val_fraction: float = _f(0.0, "fraction of the training rows held out for validation (0: none)")
    assignment: dict = _f({}, "explicit columns per organization by name, e.g. {alice: [a, b], bob: [c]}")
    csv_files: list = _f([], "dataset=csv: one CSV per organization, Alice's (with the label) first")
    id_column: str = _f("id", "dataset=csv: the shared ID column used to align rows")
    label_column: str = _f("label", "dataset=csv: the label column in Alice's file")
    task: str = _f("", "dataset=csv: classification or regression")
    categorical: list = _f(
        ["error"],
        "dataset=csv: a text column is refused (error) or one-hot encoded on the party's own training rows "
        "(onehot); one value for all files or one per file",
    )
    missing: list = _f(
        ["error"],
        "dataset=csv: a missing value is refused (error), drops its row from every party before the split (drop), "
        "or is imputed on the party's own training rows (impute); one value for all files or one per file",
    )
    task_loss: str = _f("auto", "Alice's loss L1: ce (classification), l1 or mse (regression); auto: ce / l1")
    learner: list = _f(
        ["linear"],
        "local model per organization: linear, mlp, cnn, lstm, gb, svm, sklearn:<path>, gb-svm; for ASCII methods "
        "a classifier: linear, mlp, tree, forest, logistic, gb, svm, sklearn:<path>; one for all or one each",
    )
    local_loss: list = _f(
        ["auto"],
        "residual loss per organization: l1, l1.5, l2, l4; auto: l1 for diabetes/"
        "boston and l1 task loss, l2 otherwise; one for all or one per organization",
    )
    epochs: int = _f(0, "local training epochs per round (0: the paper's, 100 linear/mlp, 10 cnn/lstm)")
    lr: float = _f(0.0, "local learning rate (0: the paper's, 0.1 SGD for linear/mlp/cnn, 1e-3 Adam for lstm)")
    optimizer: str = _f("auto", "local optimizer: sgd, adam, or auto (adam for lstm, sgd otherwise)")
    momentum: float = _f(0.9, "local SGD momentum")
    weight_decay: float = _f(5e-4, "local weight decay")
    milestones: list = _f(
        ["auto"], "epochs at which the local rate is multiplied by gamma (auto: [50] linear/mlp)", item="int|str"
    )
    gamma: float = _f(0.1, "local learning-rate decay factor")
    batch_size: int = _f(0, "local batch size (0: the paper's, 1024 linear/mlp, 512 cnn, 8 lstm; ≥ N: full batch)")
    hidden: list = _f([64], "hidden widths of the mlp learner", item="int")
    cnn_widths: list = _f(
        [64, 128, 256, 512], "channel widths of the cnn learner's conv blocks (GAL Table 8)", item="int"
    )
    lstm_hidden: int = _f(128, "hidden size of the lstm learner")
    dropout: float = _f(0.3, "dropout after the lstm learner's last step")
    grad_clip: float = _f(1.0, "local gradient-norm clip (0: off)")
    cnn_last_pool: bool = _f(
        True,
        "cnn learner: max-pool after the last conv block too, as GAL Table 8 (false: only after the others, "
        "as the GAL authors' code does)",
    )
    dms: bool = _f(False, "Deep Model Sharing: one feature extractor per organization, one head per round")
    baseline_epochs: int = _f(0, "epochs of the one-shot centralized baselines late and interm (0: epochs)")
    late_fusion: str = _f(
        "mean",
        "late baseline: mean (the organizations' outputs averaged, as the GAL authors' code does; it gives "
        "the paper's Late figures) or sum (added, as the paper's text describes it); the same accuracy, "
        "different regression figures",
    )
    engine: str = _f("fast", "fit engine of torch learners: fast (device-resident loop) or trainer (Lightning)")
    precision: str = _f("32-true", "32-true, bf16-mixed or 16-mixed (fp16 with loss scaling), for either engine")
    accelerator: str = _f("auto", "engine=trainer: Lightning accelerator")
    devices: str = _f("1", "engine=trainer: Lightning devices (a count, a list, or auto)")
    strategy: str = _f("auto", "engine=trainer: Lightning strategy, e.g. ddp for one organization on several GPUs")
    weights: str = _f("learned", "assistance weights: learned (simplex), bag (plain average), last")
    eta: str = _f("linesearch", "assisted learning rate: linesearch (L-BFGS) or constant")
    eta_value: float = _f(1.0, "constant rate (eta=constant) or the line search's start")
    eta_cap: float = _f(0.0, "the authors' eta = min(|eta|, cap); 0 follows the paper (no cap)")
    al_mode: str = _f(
        "chained",
        "AL baseline: chained (each org fits the residual the previous left) or "
        "authors (all fit the round's residual, the last one is kept)",
    )
    privacy: str = _f("none", "privacy on the residuals Alice sends: none, dp (Laplace), ip (interval privacy)")
    privacy_alpha: float = _f(1.0, "Laplace mechanism's alpha: noise scale (b - a)/alpha")
    privacy_scope: str = _f(
        "others",
        "who fits the perturbed residual: others (Alice fits her own model on the clean one) or all (Alice's "
        "own fit uses the same perturbed broadcast, as in the authors' code); weights and line search stay clean",
    )
    noise_sigma: float = _f(0.0, "Gaussian noise sigma on the outputs of noisy_organizations (training and prediction)")
    noisy_organizations: list = _f(
        ["half"], "organizations whose outputs get noise_sigma noise: indices, or half (M//2 .. M-1)", item="int|str"
    )
    noninformative_organizations: list = _f(
        [], "organizations whose inputs are replaced by N(0, 1) noise: indices, or half (M//2 .. M-1)", item="int|str"
    )
    concurrent: bool = _f(True, "fit same-architecture organizations in one pass (false: sequential)")
    device: str = _f(
        "auto", "cpu, cuda, cuda:N, or auto (cuda when available); cuda with several GPUs spreads organizations"
    )
    transport: str = _f(
        "local",
        "how Alice's coordinator reaches the parties: local (in this process) or ray (one Ray actor per party, "
        "each loading only its own data)",
    )
    ray_address: str = _f("", "transport=ray: the Ray cluster to join (auto, or host:port); empty starts a local one")
    party_cpus: list = _f(
        [1.0], "transport=ray: CPUs per party actor (its torch threads), one for all or one per party", item="float"
    )
    party_gpus: list = _f(
        [0.0], "transport=ray: GPUs per party actor (fractions share a GPU), one for all or one per party", item="float"
    )
    party_nodes: list = _f(
        [""],
        "transport=ray: a custom Ray resource per party (e.g. node_bob, from `ray start --resources`) that pins "
        "its actor to the machine holding its data; empty: anywhere",
    )
    party_dirs: list = _f(
        [""],
        "where each party keeps its checkpoints (<dir>/<name>/round-<t>.ckpt, on the machine it runs on), one for "
        "all or one per party; empty: <out>/parties",
    )
    compare: list = _f(
        ["alone"],
        "methods also run for comparison; final metrics go beside the main one (ASCII: alone/joint mean "
        "single/oracle; DC: alone means local; MPDL: alone means ftl)",
    )
    early_stop_eta: float = _f(0.0, "stop when |eta| falls below this (0: off)")
    # --- ASCII (ascii, ascii_simple, ascii_random, ensemble_adaboost, single, oracle) ---------------
    ascii_stop: str = _f(
        "alpha",
        "ASCII stop criterion: alpha (an agent's model weight alpha <= 0, the paper's default) or cv "
        "(validation accuracy stops improving; needs val_fraction > 0)",
    )
    ascii_alpha: str = _f(
        "exact",
        "ASCII model weight of the agents after the first of a round: exact (the minimizer of the round's joint "
        "exponential loss, eq. 6, given the scores received; the same as ASCII-Simple's, and no alphas are sent) "
        "or paper (eqs 11/13 as printed, which count the earlier agents' loss twice)",
    )
    ascii_patience: int = _f(1, "ascii_stop=cv: rounds without a better validation accuracy before stopping")
    ascii_resample: bool = _f(
        False, "ASCII: fit a classifier whose fit takes no sample_weight on a weighted resample instead of refusing it"
    )
    max_depth: int = _f(0, "ASCII tree, forest and gb classifiers: maximum depth (0: unlimited; gb: 3)")
    n_trees: int = _f(100, "ASCII forest classifier: number of trees")
    synthetic_train: int = _f(1000, "ascii_blobs* datasets: training rows (the paper: 1000)")
    synthetic_test: int = _f(100000, "ascii_blobs* datasets: test rows (the paper: 100000)")
    # --- Data Collaboration analysis (methods dc_smote, dc_tsvd, dc_rand, dc_raw, centralized, local) ----------
    dc_row_groups: int = _f(2, "DC: c, groups of training rows (horizontal split)")
    dc_column_groups: int = _f(2, "DC: d, groups of columns (vertical split); party (i, j) holds rows i, columns j")
    dc_feature_split: str = _f(
        "alternate",
        "DC: columns to groups: alternate (k mod d: odd/even for d=2), random (seeded), "
        "type (continuous, categorical), named (from assignment)",
    )
    dc_public_rows: int = _f(100, "DC: p, unlabeled public rows X_pub held out from the data (SMOTE anchors' source)")
    dc_standardize: bool = _f(True, "DC: z-score features with training statistics (false: raw units)")
    dc_anchor_rows: int = _f(1000, "DC: r, anchor rows (dc_raw uses the training rows)")
    dc_reduction: str = _f(
        "pca", "DC: worker-side reduction f_ij: pca, tsvd, identity, or sklearn:sklearn.<module>.<Class>"
    )
    dc_dim: int = _f(5, "DC: reduced dimension per party; <= 0 means the party's columns + dc_dim (0: keep all)")
    dc_collab_dim: int = _f(0, "DC: collaboration dimension m-hat; 0: the summed reduced dimensions of a row group")
    dc_central: str = _f(
        "ridge", "DC: master's analysis h: ridge (one-hot targets), gb, or sklearn:sklearn.<module>.<Class>"
    )
    dc_interpretable: str = _f(
        "tree", "DC: worker-side interpretable model t_i: tree, gb, or sklearn:sklearn.<module>.<Class>"
    )
    dc_tree_splits: int = _f(5, "DC: maximum number of branch-node splits of the tree")
    dc_smote_k: int = _f(25, "DC SMOTE: neighbours k (at most dc_public_rows - 1)")
    dc_smote_alpha: float = _f(1.5, "DC SMOTE: coefficients c ~ U(0, alpha); 1.5 keeps the variance")
    dc_tsvd_rank: int = _f(3, "DC TSVD: rank of each party's truncated SVD")
    dc_tsvd_delta: float = _f(0.1, "DC TSVD: perturbation delta of the N(0, 1) noise added to it")
    dc_top_t: int = _f(3, "DC: t of Dice_t, the top-t essential features compared with Centralized's")
    # --- MPDL, multi-party dual learning (methods mpdl, ftl) -------------------------------------------------
    mpdl_gamma: float = _f(0.1, "MPDL: co-occurrence probability gamma (D_C = N[0, g], D_B = N(g, 0.5+g/2], D_A rest)")
    mpdl_epsilon: float = _f(0.5, "MPDL: privacy budget epsilon of the DP layer h0 (0: no privacy, epsilon = inf)")
    mpdl_lambda: float = _f(0.01, "MPDL: Lagrange weight lambda of the duality regularizer (eq. 11)")
    mpdl_folds: int = _f(5, "MPDL: K, folds of the co-occurring rows for dual cross-validation (Algorithm 1)")
    mpdl_threshold: float = _f(0.15, "MPDL: T, stop when V_D - V_C > T on the validation fold")
    mpdl_max_iterations: int = _f(2, "MPDL: m, maximum iterations of Algorithm 1 (one round each; capped by rounds)")
    mpdl_dual_epochs: int = _f(10, "MPDL: epochs of dual learning per iteration (FTL: autoencoder epochs)")
    mpdl_central_epochs: int = _f(20, "MPDL: epochs of each central (split-network) model")
    mpdl_lr: float = _f(0.1, "MPDL: SGD learning rate of the dual, central and FTL models")
    mpdl_batch_size: int = _f(32, "MPDL: minibatch size of dual and central training")
    mpdl_hidden: int = _f(0, "MPDL: hidden width of the dual MLPs (0: (in + out)/2)")
    mpdl_paillier: bool = _f(False, "MPDL: encrypt the density differences with Paillier (slow; false: plaintext)")
    mpdl_key_bits: int = _f(1024, "MPDL: Paillier modulus bits")
    mpdl_psi_bits: int = _f(2048, "MPDL: MODP group of the private set intersection: 1024 or 2048 bits")
    mpdl_max_rows: int = _f(0, "MPDL: use only the first N rows of a (shuffled) dataset (0: all)")
    mpdl_ftl_dim: int = _f(0, "MPDL FTL reference: common code dimension (0: min(64, min(d_A, d_B)/2))")
    mpdl_central: str = _f(
        "mlp",
        "MPDL: central model at C: mlp, or cnn (images: the paper's CNN split at conv1; CIFAR-10's net for colour)",
    )
    mpdl_dual_arch: str = _f("mlp", "MPDL: dual models f, g: mlp (the paper), or cnn (images: conv trunk + linear)")
    mpdl_dual_clip: float = _f(0.0, "MPDL: clip each dual model's gradient norm to this before its SGD step (0: off)")
    mpdl_dp_noise: str = _f(
        "per_row",
        "MPDL: h0 noise: per_row (Laplace d/epsilon on every entry: epsilon-DP per row) or offset_no_dp "
        "(the paper's eq. 14 literally: one shift per feature; no privacy guarantee)",
    )
    out: str = _f("", "run directory (default runs/<method>_<dataset>_M<M>_seed<seed>; DC: _<c>x<d>_)")

    # --- loading ------------------------------------------------------------------------------
    @classmethod
    def fields(cls) -> dict[str, dataclasses.Field]:
        return {f.name: f for f in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> RunConfig:
        known = cls.fields()
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise VCLInputError(
                f"{source}: unknown key(s) {', '.join(unknown)}; see `python train.py --help` for the options."
            )
        cfg = cls()
        for k, v in values.items():
            setattr(cfg, k, coerce(k, v, known[k], source))
        return cfg

    @classmethod
    def from_yaml(cls, path: str | Path) -> RunConfig:
        p = Path(path)
        if p.is_dir():
            raise VCLInputError(f"config file {p} is a directory; pass a YAML file, e.g. one from configs/.")
        if not p.is_file():
            raise VCLInputError(f"config file {p} does not exist; pass a YAML file from configs/.")
        try:
            values = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except UnicodeDecodeError:
            raise VCLInputError(f"config file {p} is not UTF-8 text; pass a YAML file.") from None
        except yaml.YAMLError as err:
            raise VCLInputError(f"config file {p} is not valid YAML ({_yaml_problem(err)}); fix its syntax.") from None
        if not isinstance(values, dict):
            raise VCLInputError(f"config file {p} must hold a mapping of option: value.")
        return cls.from_dict(values, source=str(p))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def run_dir(self) -> Path:
        if self.method in DC_METHODS:
            parties = f"{self.dc_row_groups}x{self.dc_column_groups}"
        else:
            parties = f"M{self.organizations}"
        return Path(self.out or f"runs/{self.method}_{self.dataset}_{parties}_seed{self.seed}")

    def identity(self) -> dict:
        """The settings a resumed run must share with its checkpoint (all but where/how long/how shown)."""
        d = self.to_dict()
        for k in ("rounds", "out", "compare", "early_stop_eta", "device", "concurrent", "engine", "download", *RUNTIME):
            d.pop(k)
        return d


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or type(err).__name__
    return f"line {mark.line + 1}: {problem}" if mark is not None else problem


def _kind(f: dataclasses.Field) -> type:
    return type(f.default) if f.default is not dataclasses.MISSING else type(f.default_factory())


def parse_flag(name: str, text: str):
    """A command-line value as its option declares: the text itself for strings, never YAML's guesses
    (``--out 'runs/trial #2'`` is that path, ``--label-column yes`` the string ``yes``)."""
    f = RunConfig.fields()[name]
    kind, flag = _kind(f), f"--{name.replace('_', '-')}"
    if kind is dict:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise VCLInputError(f"{flag} {text!r} is not a valid mapping ({_yaml_problem(err)}).") from None
        if not isinstance(value, dict):
            raise VCLInputError(f"{flag} {text!r} is not a mapping; write it as {{name: [columns], ...}}.")
        return value
    item = f.metadata.get("item", "str") if kind is list else kind.__name__
    try:
        if item in ("int", "int|str"):
            try:
                return int(text)
            except ValueError:
                if item == "int" or _looks_numeric(text):
                    raise
                return text
        if item == "float":
            return float(text)
        if item == "bool":
            if text.lower() not in _BOOLS:
                raise ValueError
            return _BOOLS[text.lower()]
        return text
    except ValueError:
        want = {"int": "a whole number", "int|str": "a whole number", "float": "a number", "bool": "true or false"}
        raise VCLInputError(f"{flag} {text!r} is not a valid {item.split('|')[0]}; give {want[item]}.") from None


_BOOLS = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def coerce(name: str, value, f: dataclasses.Field, source: str = "config"):
    """Convert a YAML/CLI value to the field's type, or say which key is wrong and what it takes."""
    kind = _kind(f)
    if kind is str and (value is None or isinstance(value, bool)):
        raise VCLInputError(f"{source}: {name}={value!r} is not a string; quote it (YAML reads yes/no/null otherwise).")
    try:
        if kind is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                return value.lower() in ("true", "1", "yes")
            return bool(value)
        if kind is list:
            return list(value) if isinstance(value, (list, tuple)) else [value]
        if kind is dict:
            if not isinstance(value, dict):
                raise ValueError
            return value
        if kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if kind is float:
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise VCLInputError(f"{source}: {name}={value!r} is not a valid {kind.__name__}.") from None
