"""Party A or B of an MPDL or FTL run: its DP layer and dual model, its side of the PSI, the bottoms of the
central models and FTL's autoencoder; it answers the collaborator's steps and messages the other party."""

from __future__ import annotations

import secrets

import numpy as np
import torch
from torch import Tensor, nn

from vcl.datamodules.overlap import PartyData
from vcl.engine.loop import Steps, minibatches, seed_for
from vcl.engine.split_network import COLLABORATOR, ActivationGradient, Activations, party_bottom
from vcl.family import Party
from vcl.messages import Ack, Labels, Message, Step, as_classes, as_float
from vcl.methods.experimenter import EXPERIMENTER
from vcl.methods.mpdl.blinding import FoldAssignment, PSIParty
from vcl.methods.mpdl.dual import DualParty, GeneratedData, OutputGradient, PerturbedMeans, PublicKey
from vcl.methods.mpdl.messages import Report
from vcl.methods.mpdl.options import PARTIES, MPDLOptions, ftl_code_dim, seeded_mlp, sgd


class OverlapParty(Party):
    """Party A or B: its raw rows enter its DP layer h₀ once (:class:`.dual.DualParty`); it keeps its PSI side, rows of
    D_C and folds, the central models' bottoms and (FTL) its autoencoder, and answers the collaborator's requests."""

    def __init__(self, data: PartyData, other: PartyData, options: MPDLOptions, seed: int, classes: int, dual: bool):
        o = self.options = options
        self.name, self.other = data.name, other.name
        self.index = PARTIES.index(self.name)
        self.seed, self.classes = seed, classes
        arch = o.dual_arch if dual else "mlp"
        common = dict(epsilon=o.epsilon, lam=o.lam, lr=o.lr, hidden=o.hidden, arch=arch, dp_noise=o.dp_noise)
        common.update(clip=o.dual_clip, device=o.device, paillier=o.paillier and dual, key_bits=o.key_bits)
        common.update(kde_rows=o.kde_rows)
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
        self.kept: int | None = None  # which central model is M_D, the model for new rows (its bottom is kept)
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
        """A: its IDs hashed and blinded, to B (:mod:`vcl.methods.mpdl.blinding`)."""
        self.psi = PSIParty(self.name, self.ids)
        self._send(self.psi.offer(self.other, r))

    def step_psi_answer(self, r: int) -> None:
        """B: A's values blinded again, and its own IDs blinded in a shuffled order, to A."""
        self.psi = PSIParty(self.name, self.ids, shuffle_seed=seed_for(self.secret, 0x5F))
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

    def step_bottom(self, r: int, which: int, keep: bool = False) -> None:
        """A fresh bottom layer for central model ``which`` (seeded as C's part), and its batch schedule; ``keep``:
        it is M_D's, the model for new rows, kept in this party's checkpoint."""
        seed = seed_for(self.seed, r, which)
        self._new_bottom(which, seed, seed_for(self.seed, r, which, 0xCE))
        if keep:
            self.kept = which

    def _new_bottom(self, which: int, seed: int, schedule_seed: int) -> nn.Module:
        module = party_bottom(self.index, self.dims, self.classes, 0, seed, self.image, self.options.device)
        gen = torch.Generator().manual_seed(schedule_seed)
        self.bottoms[which] = (module, sgd(module.parameters(), self.options), gen)
        return module

    def step_forward(
        self, r: int, which: int, rows: str, batch: int = -1, positions: list[int] | None = None
    ) -> Activations:
        """This party's bottom output on a minibatch of a row set (``batch`` of the epoch's schedule), or on every row
        of it (``batch = -1``: prediction, no gradient; ``positions``: only those rows)."""
        module, _, gen = self.bottoms[which]
        if rows == "test" and rows not in self.inputs:  # prediction from a checkpoint: the test rows' h₀ outputs
            self.inputs["test"] = self.party.local(self.party.test)
        x = self.inputs[rows]
        if batch < 0:
            pick = torch.arange(x.shape[0]) if positions is None else torch.as_tensor(positions, dtype=torch.long)
            with torch.no_grad():
                return Activations(self.name, COLLABORATOR, r, as_float(module(x[pick.to(x.device)])))
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
        state = {"dual": self.party.state_dict(), "rows": self.rows, "fold": self.fold, "only": self.only}
        if self.kept in self.bottoms:  # its bottom of M_D, the model for new rows
            weights = {k: v.detach().cpu() for k, v in self.bottoms[self.kept][0].state_dict().items()}
            state["central"] = {"which": self.kept, "bottom": weights}
        return state

    def load_state_dict(self, state: dict) -> None:
        self.party.load_state_dict(state["dual"])
        self.secret = self.party.noise_seed
        self.rows, self.fold, self.only = state["rows"], state["fold"], state["only"]
        kept = state.get("central")  # absent in a run made before vcl kept M_D
        if kept is not None:
            self.kept = int(kept["which"])
            self._new_bottom(self.kept, 0, 0).load_state_dict(kept["bottom"])
