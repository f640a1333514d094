"""The collaborator C: Algorithm 1 (MPDL) and the FTL reference, reaching A, B and the experimenter only by
messages through the transport."""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import Tensor, nn

from vcl.coordinator.federation import Federation
from vcl.engine.loop import minibatches, seed_for, train_epochs
from vcl.engine.split_network import COLLABORATOR, ActivationGradient, CentralTop
from vcl.engine.tasks import Task
from vcl.errors import VCLInputError
from vcl.messages import Step, as_float
from vcl.methods.experimenter import EXPERIMENTER
from vcl.methods.mpdl.messages import Report
from vcl.methods.mpdl.options import PARTIES, ftl_code_dim, options_of, seeded_mlp, sgd
from vcl.protocol import Protocol, RoundRecord


class PartialOverlapProtocol(Protocol):
    """What MPDL and FTL share, at the collaborator C: the PSI alignment (run by A and B, C learns the size
    of D_C), the central split networks and scoring."""

    uses_dual = True
    coordinator = COLLABORATOR
    keeps_models = False  # the run reports its last round's outputs on the test and A-only rows (MPDL keeps its
    # central model M_D as well, for train.py predict: :meth:`MultiPartyDualLearning.predict`, tested equal to them)

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

    def central(self, which: int, keep: bool = False) -> CentralTop:
        """C's part of a fresh central model ``which``; each party makes its bottom layer the same way (``keep``: the
        model for new rows, M_D, whose bottom each party keeps in its checkpoint)."""
        self.ask(PARTIES, "bottom", which=which, keep=keep)
        return self.fresh_top(seed_for(self.seed, self.round, which))

    def fresh_top(self, seed: int) -> CentralTop:
        """C's part of a central model, its initialization drawn from ``seed``."""
        image = self.image_shape if self.options.central == "cnn" else None
        return CentralTop(self.dims, self.task.num_outputs, 0, self.options.lr, seed, image, self.options.device)

    def fit_central(self, top: CentralTop, which: int, rows: str) -> float:
        """Train on a row set (every party's row i is the same individual); mean last-epoch loss."""
        o, fed = self.options, self.federation
        y = self.ask(["b"], "labels", rows=rows)[0].values.to(top.device).long()
        gen = torch.Generator().manual_seed(seed_for(self.seed, self.round, which, 0xCE))
        n, sums = y.shape[0], [0.0] * o.central_epochs

        def step(epoch: int, batch) -> None:  # the parties draw the same schedule at their first batch
            b, idx = batch
            logits, leaves = top.forward(self.ask(PARTIES, "forward", which=which, rows=rows, batch=b), True)
            loss = nn.functional.cross_entropy(logits, y[idx])
            top.step(loss)
            fed.request_all(zip(PARTIES, top.errors(leaves, list(PARTIES), self.round), strict=True))
            sums[epoch] += float(loss.detach()) * len(idx)

        train_epochs(top.steps, o.central_epochs, lambda epoch: enumerate(minibatches(n, o.batch_size, gen)), step)
        return sums[-1] / max(n, 1) if sums else 0.0

    def logits(self, top: CentralTop, which: int, rows: str, positions: list[int] | None = None) -> Tensor:
        """C's class scores (logits) on a row set (``positions``: those of its rows), on the CPU (where runs are
        scored)."""
        where = {} if positions is None else {"positions": positions}
        with torch.no_grad():
            return top.forward(self.ask(PARTIES, "forward", which=which, rows=rows, **where), False)[0].cpu()

    def predict(self, split: str, rows: Tensor | None = None) -> Tensor:
        """New rows (``train.py predict``): only MPDL keeps a model for them (:class:`MultiPartyDualLearning`)."""
        raise VCLInputError(
            f"method {self.name} keeps no model that scores new people (its autoencoders and C's classifier end with "
            "the run); predict with a run of mpdl."
        )

    def train_loss(self) -> float:
        return self._loss

    def evaluate(self) -> dict[str, float]:
        return {s: self.task.metric(self.F[s], y) for s, y in self.labels.items() if s != "train"}

    def report(self, step: str, **values) -> dict[str, float]:
        """The parties' (and C's) reports to the experimenter, then its scores."""
        self.ask(PARTIES, "report")
        fed = self.federation
        if values:
            fed.request(EXPERIMENTER, Report(COLLABORATOR, EXPERIMENTER, self.round, values))
        return fed.request(EXPERIMENTER, Step(COLLABORATOR, EXPERIMENTER, self.round, step)).figures

    def state_dict(self) -> dict:
        extra = {"overlap": self.overlap, "labeled": self.labeled, "scores": dict(self.scores), "loss": self._loss}
        return {**super().state_dict(), **extra}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.overlap, self.labeled, self._loss = state["overlap"], state["labeled"], state["loss"]
        self.scores = dict(state["scores"])
        if self.overlap:  # key pairs are fresh after a restart: exchange the public keys again
            self.exchange_keys()


PREDICTED = ("test", "a_only")  # the row sets MPDL's model scores: every feature held, or A's alone


class MultiPartyDualLearning(PartialOverlapProtocol):
    """Algorithm 1 at C. The model for new rows is M_D, the central model Algorithm 1 outputs: C keeps its top
    (:attr:`kept`), each party its bottom layer; M_C is not kept (docs/mpdl.md, "Prediction")."""

    name = "mpdl"

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.max_rounds = self.options.iterations
        self.kept: tuple[int, CentralTop] | None = None  # (which, C's top) of the last round's M_D

    def predict(self, split: str, rows: Tensor | None = None) -> Tensor:
        """M_D's logits on the rows of ``split`` (``test`` or ``a_only``; ``rows``: those of them, by position); what
        crosses is what the run sends for the same rows (docs/mpdl.md, "Prediction")."""
        if self.kept is None:
            raise VCLInputError(
                "this mpdl run keeps no central model for new rows (it was made before vcl kept MPDL's M_D); train it "
                "again with this version of vcl to score with it."
            )
        if split not in PREDICTED:
            raise VCLInputError(
                f"MPDL's model scores the test rows (both parties' features) and the rows only A holds (a_only), not "
                f"{split!r}."
            )
        if split == "a_only":
            self.ask(["a"], "complete")
            self.ask(PARTIES, "a_only")
        which, top = self.kept
        positions = None if rows is None else [int(i) for i in torch.as_tensor(rows).reshape(-1)]
        return self.logits(top, which, split, positions)

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.kept is not None:
            which, top = self.kept
            weights = {k: v.detach().cpu() for k, v in top.top.state_dict().items()}
            state["central"] = {"which": which, "top": weights, "bias": top.bias.detach().cpu()}
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        kept = state.get("central")  # absent in a run made before vcl kept M_D
        if kept is not None:
            top = self.fresh_top(0)  # its weights are the kept ones
            top.top.load_state_dict(kept["top"])
            with torch.no_grad():
                top.bias.copy_(kept["bias"].to(top.bias.device))
            self.kept = (int(kept["which"]), top)

    def dual_epoch(self, epoch: int) -> None:
        """Algorithm 2 over D_C: per minibatch, each party's generation of the other's rows, the other's
        plaintext gradient and (encrypted) density difference, each party's cross term, both updates."""
        self.ask(PARTIES, "dual_epoch", epoch=epoch)
        for b in range(math.ceil(self.overlap / self.options.batch_size)):
            for step in ("generate", "assess", "cross", "update"):
                self.ask(PARTIES, step, batch=b)

    def run_round(self) -> RoundRecord:
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
        m_c, m_d = self.central(1), self.central(2, keep=True)
        self.fit_central(m_c, 1, "train")
        self._loss = self.fit_central(m_d, 2, "train+p")
        y_val = self.ask(["b"], "labels", rows="val")[0].values.cpu().long()  # C scores with B's validation labels
        v_c = self.task.metric(self.logits(m_c, 1, "val"), y_val)
        v_d = self.task.metric(self.logits(m_d, 2, "val"), y_val)
        final = v_d - v_c > o.threshold or r >= o.iterations
        if final:  # Algorithm 1 returns: refit M_C on D_C and M_D on D_C ∪ D_P
            if v_d - v_c > o.threshold:
                self.stopped = f"V_D - V_C = {v_d - v_c:.3f} > T = {o.threshold}"
            m_c, m_d = self.central(3), self.central(4, keep=True)
            self.fit_central(m_c, 3, "all")
            self._loss = self.fit_central(m_d, 4, "all+p")
        which = (3, 4) if final else (1, 2)
        self.kept = (which[1], m_d)  # the model for new rows (:meth:`predict`)
        self.F["test"] = self.logits(m_d, which[1], "test")
        joint_t = self.task.metric(self.logits(m_c, which[0], "test"), self.labels["test"])
        # MPDL_A: A completes its A-only rows with f and sends B its generation of them
        self.ask(["a"], "complete")
        self.ask(PARTIES, "a_only")
        self.F["a_only"] = self.logits(m_d, which[1], "a_only")
        self.scores.update(
            joint_t=joint_t,
            dual_t=self.task.metric(self.F["test"], self.labels["test"]),
            mpdl_a=self.task.metric(self.F["a_only"], self.labels["a_only"]),
            v_c=v_c,
            v_d=v_d,
            dual_seconds_per_epoch=dual_seconds,
            **self.report("mpdl_scores"),
        )
        return self.record(fold=k, final=final, scores=dict(self.scores))


class FederatedTransfer(PartialOverlapProtocol):
    """FTL_A (Section IV-B, after Liu et al. [11]): per-party stacked autoencoders mapped to a common space; C's
    classifier scores A's codes of the A-only rows (FTL_A) and of the test rows (docs/mpdl.md)."""

    name = "ftl"
    max_rounds = 1
    uses_dual = False

    def run_round(self) -> RoundRecord:
        self.round = r = 1
        self.align()
        o, k, fed, bs = self.options, self.task.num_outputs, self.federation, self.options.batch_size
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
            fed.request("b", ActivationGradient(COLLABORATOR, "b", r, as_float(leaf.grad)))
            losses[epoch].append(float(loss.detach()))

        def alignment(epoch: int) -> None:  # on D_C: each party's code pulled towards the other's, party to party
            for b in range(math.ceil(self.overlap / bs)):
                self.ask(PARTIES, "ftl_align", batch=b)
                self.ask(PARTIES, "ftl_pull", batch=b)

        train_epochs(steps_c, epochs, schedule, supervised, epoch_end=alignment)
        self._loss = float(np.mean(losses[-1] if losses else []))
        test_codes = self.ask(["a"], "ftl_codes", rows="test")[0].values
        a_only_codes = self.ask(["a"], "ftl_codes", rows="a_only")[0].values
        with torch.no_grad():
            self.F["test"] = clf(test_codes).cpu()
            self.F["a_only"] = clf(a_only_codes).cpu()
        self.scores.update(ftl_a=self.task.metric(self.F["a_only"], self.labels["a_only"]), code_dim=code)
        weights = {name: w.detach().cpu() for name, w in clf.state_dict().items()}  # data, not the module: it crosses
        self.scores.update(self.report("ftl_scores", codes_a=test_codes, classifier=weights))
        return self.record(scores=dict(self.scores))


def build(config, data, method: str, family) -> PartialOverlapProtocol:
    """MPDL or FTL at C; A, B and the experimenter reached through the transport (``family``:
    :class:`vcl.methods.mpdl.MPDL`, which makes them)."""
    names = ["a", "b", EXPERIMENTER]
    fed = Federation.open(config, family, method, data, names, lambda: family.parties(config, method, data))
    dims = {"a": data.a.num_features, "b": data.b.num_features}
    cls = MultiPartyDualLearning if method == "mpdl" else FederatedTransfer
    task = Task(data.task, data.num_classes, "ce")
    return cls(task, fed, data.labels, dims, data.a.image_shape, options_of(config), seed=config.run.seed)
