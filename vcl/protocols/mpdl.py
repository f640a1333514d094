"""Multi-party dual learning (MPDL, Algorithm 1 with Algorithm 2 inside) and the FTL reference.

Parties A (features only) and B (features and labels) share only the co-occurring rows D_C, found by
PSI in the first round. The collaborator C runs the protocol (it is the coordinator) and reaches A and B
only through the transport: it asks for steps (:class:`~vcl.messages.Step`), the parties answer and send
each other what Algorithm 2 exchanges (party to party, relayed by the transport and counted). Every round
j = 1..m of Algorithm 1 (dual cross-validation):

1. pick a fold k of D_C; train the dual models f: A→B and g: B→A for ``dual_epochs`` on D_C with the
   privacy-preserving exchange of Algorithm 2 (:mod:`vcl.dual`; the dual models are never re-initialized);
2. B generates A's features of its B-only rows, D_P = {(g(x^B), x^B)}, and sends them to A;
3. re-initialize the central models (split networks: each party's bottom layer at the party, the rest at
   C, :mod:`vcl.split_network`): M_C (joint_T) on D_T^k, M_D (dual_T) on D_T^k ∪ D_P; score both on D_V^k
   with the validation labels B sends: V_C, V_D;
4. stop when V_D − V_C > T (or at round m); then M_C and M_D are refitted on all of D_C (∪ D_P).

The minibatch schedules (Algorithm 2's over D_C, the central fits') come from the run's seed, which every
party holds, so only a step's number crosses, not row indices.

Evaluation: dual_T and joint_T on the test rows (all features, each party through its own h₀); MPDL_A on
the rows only A holds, B's side completed by A's f (x̂^B sent A → B); the inference MAE of Section IV-F
and the attacks of :mod:`vcl.attacks`, computed by the experimenter (:class:`OverlapExperimenter`) from its
own view of the raw data and what each party reports of what it holds; the experimenter's messages are not
the protocol's communication. C scores with the experimenter's test labels.

FTL_A (:class:`FederatedTransfer`): each party trains an autoencoder; B's code learns the label through C's
classifier on B's labeled rows and both codes are pulled together on D_C (Liu et al.'s supervised and
alignment losses); C's classifier is then applied to A's codes.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import secrets
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn

from vcl import optim
from vcl.attacks import h0_attack, reconstruction_attack, trivial_mae
from vcl.config import MPDLGroup, RunConfig, config_integers, party_copy
from vcl.datamodules.image import IMAGE_DATASETS
from vcl.datamodules.overlap import OverlapData, OverlapDataModule, PartyData
from vcl.dual import DualParty, GeneratedData, OutputGradient, PerturbedMeans, PublicKey, seeded_mlp
from vcl.errors import VCLInputError
from vcl.federation import Federation
from vcl.loop import Steps, minibatches, seed_for, train
from vcl.messages import EXPERIMENTER, Ack, Labels, Message, Step, as_classes, as_float
from vcl.paillier import check_key_bits
from vcl.privacy import FeatureDPLayer
from vcl.protocols.base import Protocol
from vcl.psi import FoldAssignment, PSIParty
from vcl.split_network import COLLABORATOR, ActivationGradient, Activations, CentralTop, party_bottom
from vcl.tasks import Task
from vcl.wiring import open_transport, resolve_device, shared_data_options


# --- the messages of this protocol step (each declares its tensors once; see vcl.messages) ---
@dataclass(frozen=True)
class Report(Message):
    """A party (or the coordinator) → the experimenter: what it holds that the run's scores need (the models
    it keeps, what it received). Outside the protocol: recorded, never counted as communication."""

    values: dict = field(repr=False)

    tensors = {"*": "values"}  # its tensors; the rest (counts, row indices) rides along uncounted


PARTIES = ("a", "b")
BLIND = 0xB11D  # the control of the redraw attack: seeds derived from this, which no config holds


@dataclass
class MPDLOptions(MPDLGroup):
    """The ``mpdl`` options and what the run decides: Algorithm 1's iterations (``mpdl.max_iterations``
    capped by ``run.rounds``) and the device the parties and C compute on (PSI, Paillier and scoring stay on
    the CPU)."""

    iterations: int = 2
    device: str = "cpu"


def ftl_code_dim(options: MPDLOptions, dims: dict[str, int]) -> int:
    return options.ftl_dim or min(64, max(2, min(dims.values()) // 2))


def sgd(params, options: MPDLOptions, clip: bool = False) -> Steps:
    """Plain SGD at the paper's rate; ``clip``: the gradient norm clipped to ``mpdl.dual_clip`` if > 0 (FTL:
    the dual models' local choice)."""
    return Steps(optim.SGD(params, lr=options.lr), clip=options.dual_clip if clip else 0.0)


class OverlapParty:
    """Party A or B: its raw rows enter its DP layer h₀ once (:class:`vcl.dual.DualParty`, which also holds
    its dual model, density estimate and Paillier keys); it keeps its side of the PSI, its rows of D_C and
    their folds, the bottoms of the central models and (FTL) its autoencoder, and answers the collaborator's
    :class:`Step` requests. What it sends the other party goes through its outbox (:meth:`outgoing`)."""

    def __init__(self, data: PartyData, other: PartyData, options: MPDLOptions, seed: int, classes: int, dual: bool):
        o = self.options = options
        self.name, self.other = data.name, other.name
        self.index = PARTIES.index(self.name)
        self.seed, self.classes = seed, classes
        arch = o.dual_arch if dual else "mlp"
        common = dict(epsilon=o.epsilon, lam=o.lam, lr=o.lr, hidden=o.hidden, arch=arch, dp_noise=o.dp_noise)
        common.update(clip=o.dual_clip, device=o.device, paillier=o.paillier and dual, key_bits=o.key_bits)
        # the party's own secret: the seed of its h₀ noise (and B's PSI shuffle), given in its own config or fresh
        # from the operating system; kept in its checkpoint, never sent, never derived from the run seed
        self.secret = getattr(o, f"secret_{self.name}") or secrets.randbits(62)
        seed = seed_for(seed, 0xA + self.index)  # the dual model's initialization (protects nothing)
        self.party = DualParty(data, other.num_features, seed=seed, noise_seed=self.secret, **common)
        self.dims = {"a": 0, "b": 0} | {self.name: data.num_features, other.name: other.num_features}
        self.image = (data.image_shape, data.pixels) if o.central == "cnn" else None  # a CNN bottom's canvas
        self.ids = list(data.ids)
        self.psi: PSIParty | None = None
        self.rows: np.ndarray | None = None  # own rows of D_C, in D_C's agreed order
        self.fold: np.ndarray | None = None
        self.only: np.ndarray | None = None  # own rows outside D_C
        self._inbox: dict[str, list[Message]] = {}
        self._outbox: list[Message] = []
        self.filled: Tensor | None = None  # the other's generation of its only rows, in this party's columns
        self.inputs: dict[str, Tensor] = {}  # the central models' inputs on each row set
        self.bottoms: dict[int, tuple[nn.Module, Steps, torch.Generator]] = {}
        self._batches: list[Tensor] = []
        self.labels: dict[str, Tensor] = {}  # B: the labels of each row set, sent to C when it asks
        self._pending: Tensor | None = None  # a bottom's output waiting for C's errors
        self._pending_which = 0  # ... of central model ``which``
        self._seen: dict[str, Tensor] | None = None  # what crossed for the other's co-occurring rows
        self._logs: dict[str, list] = {"align": [], "difference": []}
        self.ftl: dict | None = None

    # --- the transport's view ----------------------------------------------------------------------------------
    def handle(self, message: Message) -> Message | None:
        if not isinstance(message, (Step, ActivationGradient)):  # from the other party: kept until used
            if isinstance(message, PerturbedMeans):
                self.party.receive_means(message)
            elif isinstance(message, PublicKey):
                self.party.receive_public_key(message)
            elif isinstance(message, FoldAssignment):
                self.fold = message.values.numpy()
                self._aligned()
            elif isinstance(message, GeneratedData) and message.rows == "only":
                self.filled = message.values  # the other's generation of its only rows, in this party's columns
            else:
                self._inbox.setdefault(message.kind, []).append(message)
            return None
        if isinstance(message, ActivationGradient):  # C's errors of this party's last activations
            return self.ftl_backward(message) if self.ftl and "pending" in self.ftl else self.backward(message)
        reply = getattr(self, f"step_{message.step}")(message.round, **message.args)
        return reply if reply is not None else Ack(self.name, message.sender, message.round)

    def outgoing(self) -> list[Message]:
        out, self._outbox = self._outbox, []
        return out

    def device(self) -> str:
        return str(self.party.device)

    def _take(self, kind: str) -> Message:
        return self._inbox[kind].pop(0)

    def _send(self, message: Message) -> None:
        self._outbox.append(message)

    # --- alignment: PSI, released means, keys ------------------------------------------------------------------
    def step_psi_blind(self, r: int) -> None:
        """A: its IDs hashed and blinded, to B (:mod:`vcl.psi`)."""
        self.psi = PSIParty(self.name, self.ids, self.options.psi_bits)
        self._send(self.psi.offer(self.other, r))

    def step_psi_answer(self, r: int) -> None:
        """B: A's values blinded again, and its own IDs blinded in a shuffled order, to A."""
        self.psi = PSIParty(self.name, self.ids, self.options.psi_bits, shuffle_seed=seed_for(self.secret, 0x5F))
        for message in self.psi.answer(self._take("BlindedIDs"), r):
            self._send(message)

    def step_psi_match(self, r: int) -> None:
        """A: its rows of D_C, and their positions in B's list, to B."""
        self.rows, indices = self.psi.match(self._take("BlindedIDs"), self._take("BlindedIDs"), r)
        self._send(indices)

    def step_psi_folds(self, r: int) -> Ack:
        """B: its rows of D_C and their K folds (to A); C learns only how many rows D_C has, and B's rows."""
        fold_seed = seed_for(self.seed, 0xF0)
        self.rows, self.fold, assignment = self.psi.assign_folds(
            self._take("IntersectionIndices"), self.options.folds, fold_seed, r
        )
        self._send(assignment)
        self._aligned()
        return Ack(self.name, COLLABORATOR, r, {"overlap": len(self.rows), "labeled": len(self.ids)})

    def _aligned(self) -> None:
        self.only = np.setdiff1d(np.arange(len(self.ids)), self.rows)
        self.psi = None  # the secret exponent is not needed again

    def step_means(self, r: int) -> None:
        self._send(self.party.means_message(self.other, r))

    def step_keys(self, r: int) -> None:
        if self.party.key is not None:
            self._send(self.party.public_key_message(self.other, r))

    # --- Algorithm 2 over D_C ----------------------------------------------------------------------------------
    def step_dual_epoch(self, r: int, epoch: int) -> None:
        gen = torch.Generator().manual_seed(seed_for(self.seed, r, epoch, 0xD0))
        self._batches = minibatches(len(self.rows), self.options.batch_size, gen)
        self._logs = {"align": [], "difference": []}

    def _batch_rows(self, batch: int) -> np.ndarray:
        return self.rows[self._batches[batch].numpy()]

    def step_generate(self, r: int, batch: int) -> None:
        self._send(self.party.generate(self._batch_rows(batch), self.other, r))

    def step_assess(self, r: int, batch: int) -> None:
        for m in self.party.assess(self._take("GeneratedData"), self._batch_rows(batch)):
            self._send(m)
        self._logs["align"].append(self.party.last["align"])
        self._logs["difference"].append(self.party.last["difference"].cpu())

    def step_cross(self, r: int, batch: int) -> None:
        self._send(self.party.cross(self._take("DensityDifference")))

    def step_update(self, r: int, batch: int) -> None:
        plain, cross = self._take("OutputGradient"), self._take("CrossGradient")
        self._observe(self._batches[batch], as_float(self.party._out), plain)
        self.party.update(plain, cross)

    def _observe(self, batch: Tensor, generated: Tensor, plain: OutputGradient) -> None:
        """The attacker's record (this party attacks the other): its own generation x̂ of the other's
        co-occurring rows and the plaintext gradient it got back, 2(x̂ − h₀(x)) + λ∇log P(x̂)·d, from which it
        reads the other's h₀ outputs: x̂ − gradient / 2. Scored by the experimenter, never used in training."""
        if self._seen is None:
            n, d = len(self.rows), self.party.other_dim
            self._seen = {k: torch.full((n, d), float("nan")) for k in "gr"}
        rows = batch.cpu()
        self._seen["g"][rows] = generated.detach().float().cpu()
        self._seen["r"][rows] = (generated.double() - plain.values.double() / 2).float().cpu()

    # --- D_P and the rows only one party holds -----------------------------------------------------------------
    def step_complete(self, r: int) -> None:
        """Generate the other's features of the rows only this party holds, and send them."""
        message = self.party.infer(self.party.x[self.only], self.other, r)
        self._send(GeneratedData(message.sender, message.receiver, r, message.values, rows="only"))

    # --- the central models' bottoms ---------------------------------------------------------------------------
    def step_sets(self, r: int, fold: int) -> None:
        """The central models' inputs: own rows centred on own means (co-occurring rows of the training folds,
        of the validation fold, all of them; each also with D_P appended), and the test rows."""
        p = self.party
        c = p.local(p.x[self.rows])
        # D_P: B's own B-only rows; A's columns of them, generated by B
        dp = p.local(p.x[self.only]) if self.name == "b" else p.local(self.filled)
        train, val = torch.as_tensor(self.fold != fold), torch.as_tensor(self.fold == fold)
        self.inputs = {"train": c[train], "val": c[val], "all": c, "test": p.local(p.test)}
        self.inputs |= {"train+p": torch.cat([c[train], dp]), "all+p": torch.cat([c, dp])}
        if self.name == "b":
            y_c, y_p = p.labels[self.rows], p.labels[self.only]
            self.labels = {"train": y_c[train], "val": y_c[val], "all": y_c}
            self.labels |= {"train+p": torch.cat([y_c[train], y_p]), "all+p": torch.cat([y_c, y_p])}

    def step_a_only(self, r: int) -> None:
        """The rows only A holds: A's own, and B's columns of them as A generated them."""
        p = self.party
        self.inputs["a_only"] = p.local(p.x[self.only]) if self.name == "a" else p.local(self.filled)

    def step_labels(self, r: int, rows: str) -> Labels:
        """B: the labels of a row set, to C."""
        return Labels(self.name, COLLABORATOR, r, as_classes(self.labels[rows], self.classes))

    def step_bottom(self, r: int, which: int) -> None:
        """A fresh bottom layer for central model ``which`` (seeded as C's part), and its batch schedule."""
        seed = seed_for(self.seed, r, which)
        module = party_bottom(self.index, self.dims, self.classes, 0, seed, self.image, self.options.device)
        gen = torch.Generator().manual_seed(seed_for(self.seed, r, which, 0xCE))
        self.bottoms[which] = (module, sgd(module.parameters(), self.options), gen)

    def step_forward(self, r: int, which: int, rows: str, batch: int = -1) -> Activations:
        """This party's bottom output on a minibatch of a row set (``batch`` of the epoch's schedule, drawn
        at its first batch), or on every row of it (``batch = -1``: prediction, no gradient)."""
        module, _, gen = self.bottoms[which]
        x = self.inputs[rows]
        if batch < 0:
            with torch.no_grad():
                return Activations(self.name, COLLABORATOR, r, as_float(module(x[torch.arange(x.shape[0])])))
        if batch == 0:
            self._batches = minibatches(x.shape[0], self.options.batch_size, gen)
        self._pending = module(x[self._batches[batch]].to(self.party.device))
        self._pending_which = which
        return Activations(self.name, COLLABORATOR, r, as_float(self._pending))

    def backward(self, message: ActivationGradient) -> Ack:
        """C's errors δ of this party's activations (eq. 18): back through the bottom, one SGD step."""
        _, steps, _ = self.bottoms[self._pending_which]
        steps.step(self._pending, message.values.to(self._pending.device))
        self._pending = None
        return Ack(self.name, message.sender, message.round)

    # --- FTL ---------------------------------------------------------------------------------------------------
    def step_ftl_setup(self, r: int) -> Labels | None:
        """The autoencoder (as Liu et al.'s FTL), this party's rows centred on its means, the shared schedule;
        B sends C the labels of its labeled rows (D_C, then its B-only rows)."""
        code = ftl_code_dim(self.options, self.dims)
        d, mid = self.party.dim, (self.party.dim + code) // 2
        seed = seed_for(self.seed, 0xEA + self.index)
        enc, dec = seeded_mlp(d, code, mid, seed), seeded_mlp(code, d, mid, seed + 1)
        enc.to(self.options.device)
        dec.to(self.options.device)
        self.ftl = {
            "enc": enc,
            "dec": dec,
            "steps": sgd([*enc.parameters(), *dec.parameters()], self.options, clip=True),
            "x": self.party.local(self.party.x),
            "gen": torch.Generator().manual_seed(seed_for(self.seed, 0xF7)),
            "labeled": np.concatenate([self.rows, self.only]) if self.name == "b" else None,
        }
        if self.name == "b":
            y = self.party.labels[self.ftl["labeled"]]
            return Labels(self.name, COLLABORATOR, r, as_classes(y, self.classes))
        return None

    def _ftl_step(self, loss: Tensor) -> None:
        self.ftl["steps"].step(loss)

    def step_ftl_epoch(self, r: int, labeled: int) -> None:
        """Both schedules of the epoch, drawn in order from the shared generator: B's labeled rows, then D_C."""
        gen = self.ftl["gen"]
        self.ftl["supervised"] = minibatches(labeled, self.options.batch_size, gen)
        self.ftl["aligned"] = minibatches(len(self.rows), self.options.batch_size, gen)

    def step_ftl_encode(self, r: int, batch: int) -> Activations:
        """B: its codes of a minibatch of its labeled rows, to C (the supervised loss is at C)."""
        x = self.ftl["x"][self.ftl["labeled"][self.ftl["supervised"][batch].numpy()]]
        u = self.ftl["enc"](x)
        self.ftl["pending"] = (u, x)
        return Activations(self.name, COLLABORATOR, r, u.detach())

    def ftl_backward(self, message: ActivationGradient) -> Ack:
        u, x = self.ftl.pop("pending")
        delta = message.values
        self._ftl_step((self.ftl["dec"](u) - x).pow(2).sum(1).mean() + (u * delta).sum())
        return Ack(self.name, message.sender, message.round)

    def step_ftl_align(self, r: int, batch: int) -> None:
        """Its codes of a minibatch of D_C, to the other party."""
        x = self.ftl["x"][self.rows[self.ftl["aligned"][batch].numpy()]]
        u = self.ftl["enc"](x)
        self.ftl["pending"] = (u, x)
        self._send(Activations(self.name, self.other, r, u.detach()))

    def step_ftl_pull(self, r: int, batch: int) -> None:
        """Reconstruction, and the pull of its code towards the other's code of the same rows."""
        u, x = self.ftl.pop("pending")
        other = self._take("Activations").values
        self._ftl_step((self.ftl["dec"](u) - x).pow(2).sum(1).mean() + (u - other).pow(2).sum(1).mean())

    def step_ftl_codes(self, r: int, rows: str) -> Activations:
        """A: its codes of the test rows, or of its A-only rows, to C."""
        x = self.party.local(self.party.test) if rows == "test" else self.ftl["x"][self.only]
        with torch.no_grad():
            return Activations(self.name, COLLABORATOR, r, self.ftl["enc"](x))

    # --- for the experimenter ----------------------------------------------------------------------------------
    def step_report(self, r: int) -> None:
        """What the run's scores need of this party (outside the protocol): its h₀ outputs and released means
        (the worst-case attack's target), its noise level, its rows of D_C, what it received of the other's
        only rows and its own dual model's reading of it, its attack record, and its last epoch's logs."""
        p = self.party
        values = {"x": p.x.cpu(), "means": p.means.cpu(), "noise_mae": p.noise_mae, "rows": self.rows}
        values |= {"only": self.only, "seen": self._seen, "logs": self._logs}
        if self.filled is not None:
            with torch.no_grad():
                values |= {"filled": self.filled.cpu(), "estimate": p._generate(self.filled).cpu()}
        if self.ftl is not None and self.name == "b":  # diagnostics: B's codes of the test rows (never sent to C)
            with torch.no_grad():
                values["test_codes"] = self.ftl["enc"](p.local(p.test)).cpu()
        self._send(Report(self.name, EXPERIMENTER, r, values))

    def state_dict(self) -> dict:
        return {"dual": self.party.state_dict(), "rows": self.rows, "fold": self.fold, "only": self.only}

    def load_state_dict(self, state: dict) -> None:
        self.party.load_state_dict(state["dual"])
        self.secret = self.party.noise_seed
        self.rows, self.fold, self.only = state["rows"], state["fold"], state["only"]


def to_cpu(value):
    """A report's value on the CPU: tensors and modules moved (a module copied), containers walked."""
    if isinstance(value, Tensor):
        return value.cpu()
    if isinstance(value, nn.Module):
        return copy.deepcopy(value).cpu()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_cpu(v) for v in value)
    return value


class OverlapExperimenter:
    """Who scores an MPDL or FTL run from outside it: the raw features of the rows only one party holds and
    each party's clean normalized rows (:attr:`OverlapData.truth`), and the parties' reports."""

    name = EXPERIMENTER

    def __init__(self, data: OverlapData, options: MPDLOptions, num_classes: int, known_seeds: tuple[int, ...] = ()):
        def layer(d: PartyData) -> FeatureDPLayer:  # h₀'s public normalization and noise scale, no draw used
            return FeatureDPLayer(
                d.train, options.epsilon, torch.Generator().manual_seed(0), options.dp_noise, d.bounds
            )

        self.h0 = {"a": layer(data.a), "b": layer(data.b)}
        self.clean = {p: self.h0[p].normalize(d.train) for p, d in (("a", data.a), ("b", data.b))}
        self.truth, self.test_labels = data.truth, data.test_labels
        self.task = Task(data.task, num_classes, "ce")
        self.reports: dict[str, dict] = {}
        self.options = options
        self.known_seeds = tuple(known_seeds)  # every whole number in a receiver's copy of the config

    def handle(self, message: Message) -> Message | None:
        if isinstance(message, Report):  # the experimenter scores on the CPU, whatever device a party used
            self.reports[message.sender] = {k: to_cpu(v) for k, v in message.values.items()}
            return Ack(self.name, message.sender, message.round) if message.sender == COLLABORATOR else None
        if not isinstance(message, Step) or message.step not in ("mpdl_scores", "ftl_scores"):
            raise TypeError(f"the experimenter cannot answer a {message.kind}.")
        figures = self.mpdl_scores() if message.step == "mpdl_scores" else self.ftl_scores()
        return Ack(self.name, message.sender, message.round, figures)

    def device(self) -> str:
        return "cpu"

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def mpdl_scores(self) -> dict[str, float]:
        a, b = self.reports["a"], self.reports["b"]
        logs = {"align_a": float(np.mean(a["logs"]["align"])), "align_b": float(np.mean(b["logs"]["align"]))}
        pairs = zip(a["logs"]["difference"], b["logs"]["difference"], strict=True)
        dual = [float((db - da).pow(2).mean()) for da, db in pairs]
        logs["dual"] = float(np.mean(dual))
        return {
            **{f"{key}_loss": value for key, value in logs.items()},
            **self.inference_error(a["filled"], b["filled"], a["noise_mae"], b["noise_mae"]),
            **self.privacy_attack(),
        }

    def inference_error(self, x_a_hat: Tensor, x_b_hat: Tensor, noise_a: float, noise_b: float) -> dict[str, float]:
        """Section IV-F: MAE of each party's inference of the other's rows against the raw (normalized)
        features, and of the DP perturbation itself (raw vs h₀'s output)."""
        err_a = (x_a_hat.cpu() - self.h0["a"].normalize(self.truth["a_features_of_b_only"])).abs()
        err_b = (x_b_hat.cpu() - self.h0["b"].normalize(self.truth["b_features_of_a_only"])).abs()
        da, db = self.clean["a"].shape[1], self.clean["b"].shape[1]
        return {
            "inference_mae_a": float(err_a.mean()),
            "inference_mae_b": float(err_b.mean()),
            "inference_mae": float(torch.cat([err_a.flatten(), err_b.flatten()]).mean()),
            "perturbation_mae": float((noise_a * da + noise_b * db) / (da + db)),
        }

    def privacy_attack(self) -> dict[str, float]:
        """How well each party can rebuild the other's normalized training rows (:mod:`vcl.attacks`; MAE in
        normalized units, entry-weighted over both parties; ``_a``: the rows of A, attacked by B):

        - ``h0_redraw_mae``: from all of the target's h₀ outputs, redrawing its noise from every seed the
          attacker could derive from its copy of the config (:meth:`redraw_seeds`), the best seed kept;
        - ``h0_blind_mae``: the same redraw from as many seeds that nobody knows (the control);
        - ``h0_attack_mae``: from all of the target's h₀ outputs and its released means, the best of the
          estimators and the redraw (the worst case: in the protocol only the co-occurring rows' h₀ outputs can
          be read off the plaintext gradients);
        - ``attack_mae``: from what actually crossed. Co-occurring rows: the attacker's own generation of them
          and the h₀ outputs it reads off the gradient it got back, alone or combined; the target's other rows:
          the generation the target sent of the attacker's features, put through the attacker's own dual model
          (for B: g(f(h₀(x^A)))); ``attack_mae_overlap``: the co-occurring rows alone;
        - ``trivial_mae``: guessing each feature's mean.
        """
        out, sizes, overlap = {}, {}, {}
        for name, attacker in (("a", "b"), ("b", "a")):
            target, seen = self.reports[name], self.reports[attacker]["seen"]
            clean, h0 = self.clean[name], self.h0[name]
            scale = h0.entry_scale if h0.private else 0.0
            means, rows, only = target["means"], target["rows"], target["only"]
            redrawn = self.redraw(h0, target["x"], clean, self.redraw_seeds())
            out[f"h0_redraw_mae_{name}"] = float((redrawn - clean).abs().mean())
            blind = self.redraw(h0, target["x"], clean, self.blind_seeds())  # the control: seeds nobody knows
            out[f"h0_blind_mae_{name}"] = float((blind - clean).abs().mean())
            estimated = h0_attack(target["x"], clean, scale, means)["mae"]
            out[f"h0_attack_mae_{name}"] = min(estimated, out[f"h0_redraw_mae_{name}"])
            out[f"trivial_mae_{name}"] = trivial_mae(clean)
            sources = {}  # empty if nothing crossed for these rows: then the attacker has only the means
            if seen is not None and not torch.isnan(seen["r"]).any():
                sources = {"gradient": seen["r"], "generated": seen["g"]}
                if redrawn is not target["x"]:  # a seed it knows repeats the noise: that estimate too
                    sources["redrawn"] = redrawn[rows]
            out[f"attack_mae_overlap_{name}"] = reconstruction_attack(sources, clean[rows], scale, means)["mae"]
            total = out[f"attack_mae_overlap_{name}"] * len(rows)
            if len(only):
                estimate = {"generated": self.reports[attacker]["estimate"]}
                total += reconstruction_attack(estimate, clean[only], scale, means)["mae"] * len(only)
            out[f"attack_mae_{name}"] = total / (len(rows) + len(only))
            sizes[name], overlap[name] = clean.numel(), len(rows) * clean.shape[1]
        for key, weights in (
            ("h0_redraw_mae", sizes),
            ("h0_blind_mae", sizes),
            ("h0_attack_mae", sizes),
            ("attack_mae", sizes),
            ("trivial_mae", sizes),
            ("attack_mae_overlap", overlap),
        ):
            out[key] = sum(out[f"{key}_{p}"] * n for p, n in weights.items()) / sum(weights.values())
        return out

    def redraw_seeds(self) -> list[int]:
        """Every seed an attacker could derive from the whole numbers of its copy of the config: each number, and
        each with the purposes this module's draws have used (``0xA`` + the party's index)."""
        seeds = []
        for s in self.known_seeds:
            seeds += [s, s + 1, *(seed_for(s, 0xA + i) for i in range(len(PARTIES)))]
        return list(dict.fromkeys(seeds))

    def blind_seeds(self) -> list[int]:
        """As many seeds as :meth:`redraw_seeds`, derived from a constant no config holds: the same attack with
        draws the receiver cannot know, so ``h0_redraw_mae`` near ``h0_blind_mae`` says the seeds it knows give
        it nothing beyond what redrawing at random does (clipped values pulled toward the middle)."""
        return [seed_for(BLIND, i) for i in range(len(self.redraw_seeds()))]

    def redraw(self, h0: FeatureDPLayer, released: Tensor, clean: Tensor, seeds: list[int]) -> Tensor:
        """The attacker's best estimate of ``clean`` by redrawing the noise (:meth:`FeatureDPLayer.redraw`) from
        each of ``seeds``: the one that comes closest, chosen with the truth (an oracle choice, so the score is a
        bound), or the released values if none comes closer."""
        best, error = released, float((released - clean).abs().mean())
        for seed in seeds:
            estimate = h0.redraw(released, torch.Generator().manual_seed(seed))
            if (e := float((estimate - clean).abs().mean())) < error:
                best, error = estimate, e
        return best

    def ftl_scores(self) -> dict[str, float]:
        """Does B's code carry the label through C's classifier, and how far are A's codes from B's?"""
        c, b = self.reports[COLLABORATOR], self.reports["b"]
        codes_a, codes_b = c["codes_a"], b["test_codes"]
        with torch.no_grad():
            scores = c["classifier"](codes_b)
        return {
            "ftl_b_test": self.task.metric(scores, self.test_labels),
            "code_std_a": float(codes_a.std(0).mean()),
            "code_std_b": float(codes_b.std(0).mean()),
            "code_gap": float((codes_a - codes_b).norm(dim=1).mean()),
        }


class PartialOverlapProtocol(Protocol):
    """What MPDL and FTL share, at the collaborator C: the PSI alignment (run by A and B, C learns the size
    of D_C), the central split networks and scoring."""

    uses_dual = True
    keeps_models = False  # only the last round's outputs on the test and A-only rows are kept

    def __init__(self, task: Task, federation: Federation, labels: dict, dims: dict, image_shape, options, seed=0):
        self.options, self.dims, self.image_shape = options, dims, image_shape
        super().__init__(task, federation, labels, seed)
        self.overlap = 0  # |D_C| once aligned
        self.labeled = 0  # B's rows
        self.scores: dict[str, float] = {}
        self._loss = float("nan")

    @property
    def channel(self):
        return self.federation.channel

    def ask(self, parties, step: str, **args) -> list[Message]:
        """Send ``Step(step, args)`` to each of ``parties`` (names); their replies, in that order."""
        requests = [(p, Step(COLLABORATOR, p, self.round, step, args)) for p in parties]
        return self.federation.transport.request_all(requests)

    def align(self) -> None:
        """PSI over the parties' IDs (A → B → A → B), B's K folds (to A); released means and keys exchanged."""
        start = time.perf_counter()
        for party, step in (("a", "psi_blind"), ("b", "psi_answer"), ("a", "psi_match")):
            self.ask([party], step)
        figures = self.ask(["b"], "psi_folds")[0].figures
        self.overlap, self.labeled = figures["overlap"], figures["labeled"]
        self.scores["psi_seconds"] = time.perf_counter() - start
        self.ask(PARTIES, "means")
        self.exchange_keys()

    def exchange_keys(self) -> None:
        if self.uses_dual and self.options.paillier:
            self.ask(PARTIES, "keys")

    def central(self, which: int) -> CentralTop:
        """C's part of a fresh central model ``which``; each party makes its bottom layer the same way."""
        self.ask(PARTIES, "bottom", which=which)
        seed = seed_for(self.seed, self.round, which)
        image = self.image_shape if self.options.central == "cnn" else None
        return CentralTop(self.dims, self.task.num_outputs, 0, self.options.lr, seed, image, self.options.device)

    def fit_central(self, top: CentralTop, which: int, rows: str) -> float:
        """Train on a row set (every party's row i is the same individual); mean last-epoch loss."""
        o, transport = self.options, self.federation.transport
        y = self.ask(["b"], "labels", rows=rows)[0].values.to(top.device).long()
        gen = torch.Generator().manual_seed(seed_for(self.seed, self.round, which, 0xCE))
        n, sums = y.shape[0], [0.0] * o.central_epochs

        def step(epoch: int, batch) -> None:  # the parties draw the same schedule at their first batch
            b, idx = batch
            logits, leaves = top.forward(self.ask(PARTIES, "forward", which=which, rows=rows, batch=b), True)
            loss = nn.functional.cross_entropy(logits, y[idx])
            top.step(loss)
            transport.request_all(zip(PARTIES, top.errors(leaves, list(PARTIES), self.round), strict=True))
            sums[epoch] += float(loss.detach()) * len(idx)

        train(top.steps, o.central_epochs, lambda epoch: enumerate(minibatches(n, o.batch_size, gen)), step)
        return sums[-1] / max(n, 1) if sums else 0.0

    def predict(self, top: CentralTop, which: int, rows: str) -> Tensor:
        """C's class scores (logits) on a row set, on the CPU (where runs are scored)."""
        with torch.no_grad():
            return top.forward(self.ask(PARTIES, "forward", which=which, rows=rows), False)[0].cpu()

    def train_loss(self) -> float:
        return self._loss

    def evaluate(self) -> dict[str, float]:
        return {s: self.task.metric(self.F[s], y) for s, y in self.labels.items() if s != "train"}

    def report(self, step: str, **values) -> dict[str, float]:
        """The parties' (and C's) reports to the experimenter, then its scores."""
        self.ask(PARTIES, "report")
        transport = self.federation.transport
        if values:
            transport.request(EXPERIMENTER, Report(COLLABORATOR, EXPERIMENTER, self.round, values))
        return transport.request(EXPERIMENTER, Step(COLLABORATOR, EXPERIMENTER, self.round, step)).figures

    def state_dict(self) -> dict:
        extra = {"overlap": self.overlap, "labeled": self.labeled, "scores": dict(self.scores), "loss": self._loss}
        return {**super().state_dict(), **extra}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.overlap, self.labeled, self._loss = state["overlap"], state["labeled"], state["loss"]
        self.scores = dict(state["scores"])
        if self.overlap:  # key pairs are fresh after a restart: exchange the public keys again
            self.exchange_keys()


class MultiPartyDualLearning(PartialOverlapProtocol):
    name = "mpdl"

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.max_rounds = self.options.iterations

    def dual_epoch(self, epoch: int) -> None:
        """Algorithm 2 over D_C: per minibatch, each party's generation of the other's rows, the other's
        plaintext gradient and (encrypted) density difference, each party's cross term, both updates."""
        self.ask(PARTIES, "dual_epoch", epoch=epoch)
        for b in range(math.ceil(self.overlap / self.options.batch_size)):
            for step in ("generate", "assess", "cross", "update"):
                self.ask(PARTIES, step, batch=b)

    def run_round(self) -> dict:
        self.round += 1
        o, r = self.options, self.round
        if not self.overlap:
            self.align()
        k = int(np.random.default_rng(seed_for(self.seed, r, 0xF1)).integers(o.folds))
        start = time.perf_counter()
        for e in range(o.dual_epochs):
            self.dual_epoch(e)
        dual_seconds = (time.perf_counter() - start) / max(o.dual_epochs, 1)
        self.ask(["b"], "complete")  # D_P: B completes its B-only rows with g and sends A its generation
        self.ask(PARTIES, "sets", fold=k)
        m_c, m_d = self.central(1), self.central(2)
        self.fit_central(m_c, 1, "train")
        self._loss = self.fit_central(m_d, 2, "train+p")
        y_val = self.ask(["b"], "labels", rows="val")[0].values.cpu().long()  # C scores with B's validation labels
        v_c = self.task.metric(self.predict(m_c, 1, "val"), y_val)
        v_d = self.task.metric(self.predict(m_d, 2, "val"), y_val)
        final = v_d - v_c > o.threshold or r >= o.iterations
        if final:  # Algorithm 1 returns: refit M_C on D_C and M_D on D_C ∪ D_P
            if v_d - v_c > o.threshold:
                self.stopped = f"V_D - V_C = {v_d - v_c:.3f} > T = {o.threshold}"
            m_c, m_d = self.central(3), self.central(4)
            self.fit_central(m_c, 3, "all")
            self._loss = self.fit_central(m_d, 4, "all+p")
        which = (3, 4) if final else (1, 2)
        self.F["test"] = self.predict(m_d, which[1], "test")
        joint_t = self.task.metric(self.predict(m_c, which[0], "test"), self.labels["test"])
        # MPDL_A: A completes its A-only rows with f and sends B its generation of them
        self.ask(["a"], "complete")
        self.ask(PARTIES, "a_only")
        self.F["a_only"] = self.predict(m_d, which[1], "a_only")
        self.scores.update(
            joint_t=joint_t,
            dual_t=self.task.metric(self.F["test"], self.labels["test"]),
            mpdl_a=self.task.metric(self.F["a_only"], self.labels["a_only"]),
            v_c=v_c,
            v_d=v_d,
            dual_seconds_per_epoch=dual_seconds,
            **self.report("mpdl_scores"),
        )
        return self._record(fold=k, final=final, scores=dict(self.scores))


class FederatedTransfer(PartialOverlapProtocol):
    """FTL_A (Section IV-B, after Liu et al. [11]): per-party stacked autoencoders mapped to a common space.
    B's code learns to carry the label through C's classifier on B's labeled rows (FTL's supervised loss:
    codes to C, gradients back, as in the split network); on D_C both codes are pulled together (FTL's
    alignment loss); each party also reconstructs its rows. C's classifier then scores A's codes of the
    A-only rows (FTL_A) and of the test rows."""

    name = "ftl"
    max_rounds = 1
    uses_dual = False

    def run_round(self) -> dict:
        self.round = r = 1
        self.align()
        o, k, transport, bs = self.options, self.task.num_outputs, self.federation.transport, self.options.batch_size
        code = ftl_code_dim(o, self.dims)
        y = self.ask(PARTIES, "ftl_setup")[1].values.to(o.device).long()  # B's labels of its labeled rows
        # C's classifier: the MLP of MPDL's central model (one hidden layer of (d_A + d_B + K)/2) on the codes
        clf = seeded_mlp(code, k, o.hidden or (sum(self.dims.values()) + k) // 2, seed_for(self.seed, 0xC1))
        clf.to(o.device)
        steps_c = sgd(clf.parameters(), o, clip=True)
        gen = torch.Generator().manual_seed(seed_for(self.seed, 0xF7))  # the schedule every side draws
        epochs = max(o.dual_epochs, o.central_epochs)
        losses: list[list[float]] = [[] for _ in range(epochs)]

        def schedule(epoch: int):  # both of the epoch's schedules, in the order every side draws them
            self.ask(PARTIES, "ftl_epoch", labeled=self.labeled)
            supervised = minibatches(self.labeled, bs, gen)
            minibatches(self.overlap, bs, gen)  # the alignment schedule, drawn by the parties
            return enumerate(supervised)

        def supervised(epoch: int, batch) -> None:  # B's codes of its labeled rows to C, C's gradients back
            b, idx = batch
            leaf = self.ask(["b"], "ftl_encode", batch=b)[0].values.clone().requires_grad_(True)
            loss = nn.functional.cross_entropy(clf(leaf), y[idx])
            steps_c.step(loss)
            transport.request("b", ActivationGradient(COLLABORATOR, "b", r, as_float(leaf.grad)))
            losses[epoch].append(float(loss.detach()))

        def alignment(epoch: int) -> None:  # on D_C: each party's code pulled towards the other's, party to party
            for b in range(math.ceil(self.overlap / bs)):
                self.ask(PARTIES, "ftl_align", batch=b)
                self.ask(PARTIES, "ftl_pull", batch=b)

        train(steps_c, epochs, schedule, supervised, epoch_end=alignment)
        self._loss = float(np.mean(losses[-1] if losses else []))
        test_codes = self.ask(["a"], "ftl_codes", rows="test")[0].values
        a_only_codes = self.ask(["a"], "ftl_codes", rows="a_only")[0].values
        with torch.no_grad():
            self.F["test"] = clf(test_codes).cpu()
            self.F["a_only"] = clf(a_only_codes).cpu()
        self.scores.update(ftl_a=self.task.metric(self.F["a_only"], self.labels["a_only"]), code_dim=code)
        self.scores.update(self.report("ftl_scores", codes_a=test_codes, classifier=clf))
        return self._record(scores=dict(self.scores))


# --- the MPDL family: how its runs are built (vcl.registry) -----------------------------------------------
PARTY_LOADS_ALL_DATA = True


def datamodule(config: RunConfig, only: int | None = None, ids: list[str] | None = None) -> OverlapDataModule:
    """Two parties whose rows partly overlap (γ of them in common), with the labels at B."""
    d = config.data
    return OverlapDataModule(
        **shared_data_options(config),
        gamma=config.mpdl.gamma,
        seed=config.run.seed,
        assignment=d.assignment or None,
        root=d.root,
        max_rows=config.mpdl.max_rows,
    )


def options_of(config: RunConfig) -> MPDLOptions:
    iterations = min(config.mpdl.max_iterations, config.run.rounds)
    device = str(resolve_device(config.run.device))
    return MPDLOptions(**dataclasses.asdict(config.mpdl), iterations=iterations, device=device)


def parties(config: RunConfig, method: str, data: OverlapData, only: int | None = None, plan=None) -> list:
    """A, B and the experimenter (every one, or only ``only``: what a party's own process builds)."""
    options, seed, k, dual = options_of(config), config.run.seed, data.num_classes, method == "mpdl"
    makers = [
        lambda: OverlapParty(data.a, data.b, options, seed, k, dual),
        lambda: OverlapParty(data.b, data.a, options, seed, k, dual),
        lambda: OverlapExperimenter(data, options, k, config_integers(party_copy(config.to_dict()))),
    ]
    return [make() for i, make in enumerate(makers) if only is None or i == only]


def build(config: RunConfig, data: OverlapData, method: str) -> PartialOverlapProtocol:
    """MPDL or FTL at C; A, B and the experimenter reached through the transport."""
    names = ["a", "b", EXPERIMENTER]
    transport = open_transport(config, method, data, names, lambda: parties(config, method, data))
    dims = {"a": data.a.num_features, "b": data.b.num_features}
    cls = MultiPartyDualLearning if method == "mpdl" else FederatedTransfer
    task = Task(data.task, data.num_classes, "ce")
    fed = Federation(transport=transport)
    return cls(task, fed, data.labels, dims, data.a.image_shape, options_of(config), seed=config.run.seed)


def check(config: RunConfig) -> None:
    """A CNN central or dual model needs images; Paillier's key is a size it can use."""
    for key in ("central", "dual_arch"):
        if getattr(config.mpdl, key) == "cnn" and config.data.dataset not in IMAGE_DATASETS:
            raise VCLInputError(
                f"mpdl.{key}=cnn needs an image dataset ({', '.join(IMAGE_DATASETS)}), not {config.data.dataset!r}."
            )
    check_key_bits(config.mpdl.key_bits)
