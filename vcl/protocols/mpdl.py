"""Multi-party dual learning (MPDL, Algorithm 1 with Algorithm 2 inside) and the FTL reference.

Parties A (features only) and B (features and labels) share only the co-occurring rows D_C, found by
PSI in the first round. Every round j = 1..m of Algorithm 1 (dual cross-validation):

1. pick a fold k of D_C; train the dual models f: A→B and g: B→A for ``dual_epochs`` on D_C with the
   privacy-preserving exchange of Algorithm 2 (:mod:`vcl.dual`; the dual models are never re-initialized);
2. B generates A's features of its B-only rows, D_P = {(g(x^B), x^B)}, and sends them to A;
3. re-initialize the central models (split networks at the collaborator C, :mod:`vcl.split_network`):
   M_C (joint_T) on D_T^k, M_D (dual_T) on D_T^k ∪ D_P; score both on D_V^k: V_C, V_D;
4. stop when V_D − V_C > T (or at round m); then M_C and M_D are refitted on all of D_C (∪ D_P).

Evaluation (the experimenter's): dual_T and joint_T on the test rows (all features, each party through
its own h₀); MPDL_A on the rows only A holds, B's side completed by A's f (x̂^B sent A → B); the
inference MAE of Section IV-F between the raw (normalized) features and the other party's inference.

FTL_A (:class:`FederatedTransfer`): each party trains an autoencoder; B's code learns the label through C's
classifier on B's labeled rows and both codes are pulled together on D_C (Liu et al.'s supervised and
alignment losses); C's classifier is then applied to A's codes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from datamodules.overlap import OverlapData
from vcl.attacks import h0_attack, reconstruction_attack, trivial_mae
from vcl.dual import DualParty, seeded_mlp
from vcl.federation import Federation
from vcl.messages import ActivationGradient, Activations, Labels, as_classes, as_float
from vcl.organization import seed_for
from vcl.protocols.base import Protocol
from vcl.psi import PSIParty, private_set_intersection
from vcl.split_network import COLLABORATOR, SplitNetwork
from vcl.tasks import Task


@dataclass
class MPDLOptions:
    gamma: float = 0.1
    epsilon: float = 0.5
    lam: float = 0.01
    folds: int = 5
    threshold: float = 0.15
    iterations: int = 2
    dual_epochs: int = 10
    central_epochs: int = 20
    lr: float = 0.1
    batch_size: int = 32
    paillier: bool = False
    key_bits: int = 1024
    psi_bits: int = 2048
    hidden: int = 0
    ftl_dim: int = 0
    central: str = "mlp"
    dual_arch: str = "mlp"
    dp_noise: str = "per_row"
    dual_clip: float = 0.0
    device: str = "cpu"  # where the parties and C compute (PSI, Paillier and scoring stay on the CPU)


class PartialOverlapProtocol(Protocol):
    """What MPDL and FTL share: the two parties, the PSI alignment, C's split networks and evaluation."""

    uses_dual = True

    def __init__(self, task: Task, data: OverlapData, options: MPDLOptions, seed: int = 0):
        self.options = options
        arch = options.dual_arch if self.uses_dual else "mlp"
        common = dict(epsilon=options.epsilon, lam=options.lam, lr=options.lr, hidden=options.hidden)
        common.update(arch=arch, dp_noise=options.dp_noise, clip=options.dual_clip, device=options.device)
        keys = dict(paillier=options.paillier and self.uses_dual, key_bits=options.key_bits)
        self.a = DualParty(data.a, data.b.num_features, seed=seed_for(seed, 0xA), **common, **keys)
        self.b = DualParty(data.b, data.a.num_features, seed=seed_for(seed, 0xB), **common, **keys)
        self.truth = data.truth
        # the experimenter's view (scoring only, like ``truth``): each party's clean normalized training rows
        self.clean = {p.name: p.h0.normalize(d.train) for p, d in ((self.a, data.a), (self.b, data.b))}
        super().__init__(task, Federation([self.b, self.a]), data.labels, seed)
        self.alignment: dict[str, np.ndarray] | None = None
        self.scores: dict[str, float] = {}
        self._loss = float("nan")

    @property
    def channel(self):
        return self.federation.channel

    def align(self, round_: int) -> None:
        """PSI over the parties' IDs; B assigns the K folds (Section III-B2); keys and means are exchanged."""
        start = time.perf_counter()
        psi_a = PSIParty("a", self.a.ids, self.options.psi_bits)
        psi_b = PSIParty("b", self.b.ids, self.options.psi_bits, shuffle_seed=seed_for(self.seed, 0x5F))
        a_rows, b_rows, fold = private_set_intersection(
            psi_a, psi_b, self.channel, round_, self.options.folds, seed_for(self.seed, 0xF0)
        )
        self.alignment = {
            "a_rows": a_rows,
            "b_rows": b_rows,
            "fold": fold,
            "a_only": np.setdiff1d(np.arange(len(self.a.ids)), a_rows),  # A's own order
            "b_only": np.setdiff1d(np.arange(len(self.b.ids)), b_rows),
        }
        self.scores["psi_seconds"] = time.perf_counter() - start
        self.b.receive_means(self.channel.send(self.a.means_message("b", round_)))
        self.a.receive_means(self.channel.send(self.b.means_message("a", round_)))
        self.exchange_keys(round_)

    def exchange_keys(self, round_: int) -> None:
        if self.a.key is not None:
            self.b.receive_public_key(self.channel.send(self.a.public_key_message("b", round_)))
            self.a.receive_public_key(self.channel.send(self.b.public_key_message("a", round_)))

    def central(self, which: int) -> SplitNetwork:
        dims = {"a": self.a.dim, "b": self.b.dim}
        seed = seed_for(self.seed, self.round, which)
        if self.options.central == "cnn":
            images = {p.name: (p.image_shape, p.pixels) for p in (self.a, self.b)}
            return SplitNetwork(
                dims, self.task.num_outputs, 0, self.options.lr, seed, "cnn", images, device=self.options.device
            )
        return SplitNetwork(dims, self.task.num_outputs, 0, self.options.lr, seed, device=self.options.device)

    def fit_central(self, net: SplitNetwork, inputs: dict[str, Tensor], labels: Tensor, which: int) -> float:
        gen = torch.Generator().manual_seed(seed_for(self.seed, self.round, which, 0xCE))
        o = self.options
        return net.fit(inputs, labels, "b", o.central_epochs, o.batch_size, gen, self.channel, self.round)

    def train_loss(self) -> float:
        return self._loss

    def evaluate(self) -> dict[str, float]:
        return {s: self.task.metric(self.F[s], y) for s, y in self.labels.items() if s != "train"}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "alignment": self.alignment, "scores": dict(self.scores), "loss": self._loss}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.alignment, self.scores, self._loss = state["alignment"], dict(state["scores"]), state["loss"]
        if self.alignment is not None:  # key pairs are fresh after a restart: exchange the public keys again
            self.exchange_keys(self.round)


class MultiPartyDualLearning(PartialOverlapProtocol):
    name = "mpdl"

    def __init__(self, task: Task, data: OverlapData, options: MPDLOptions, seed: int = 0):
        super().__init__(task, data, options, seed)
        self.max_rounds = options.iterations
        self._seen: dict[str, Tensor] | None = None  # what crossed for the co-occurring rows (the attack's)

    # --- Algorithm 2 over D_C ------------------------------------------------------------------------
    def dual_epoch(self, epoch: int) -> dict[str, float]:
        al, a, b, ch, r = self.alignment, self.a, self.b, self.channel, self.round
        gen = torch.Generator().manual_seed(seed_for(self.seed, r, epoch, 0xD0))
        align_a, align_b, dual = [], [], []
        for batch in torch.randperm(len(al["a_rows"]), generator=gen).split(self.options.batch_size):
            ia, ib = al["a_rows"][batch.numpy()], al["b_rows"][batch.numpy()]
            x_b_hat = ch.send(a.generate(ia, "b", r))  # f(x^A) → B
            x_a_hat = ch.send(b.generate(ib, "a", r))  # g(x^B) → A
            plain_for_a, diff_b = (ch.send(m) for m in b.assess(x_b_hat, ib))
            plain_for_b, diff_a = (ch.send(m) for m in a.assess(x_a_hat, ia))
            self._observe(batch, x_a_hat, plain_for_b, x_b_hat, plain_for_a)
            cross_for_b = ch.send(a.cross(diff_b))
            cross_for_a = ch.send(b.cross(diff_a))
            a.update(plain_for_a, cross_for_a)
            b.update(plain_for_b, cross_for_b)
            # logs only: each party's own figures (ℓ_dual from both parties' private differences)
            align_a.append(a.last["align"])
            align_b.append(b.last["align"])
            dual.append(float((b.last["difference"] - a.last["difference"]).pow(2).mean()))
        return {"align_a": float(np.mean(align_a)), "align_b": float(np.mean(align_b)), "dual": float(np.mean(dual))}

    def _observe(self, batch: Tensor, x_a_hat, plain_for_b, x_b_hat, plain_for_a) -> None:
        """The attack's record of what crossed for these co-occurring rows (the experimenter's, never used in
        training): each party's own generation x̂ of the other's rows and the plaintext gradient it got back,
        2(x̂ − h₀(x)) + λ∇log P(x̂)·d, from which it reads the other's h₀ outputs: x̂ − gradient / 2."""
        if self._seen is None:
            n = len(self.alignment["a_rows"])
            self._seen = {f"{p.name}_{k}": torch.full((n, p.dim), float("nan")) for p in (self.a, self.b) for k in "gr"}
        rows = batch.cpu()
        for name, gen, plain in (("a", x_a_hat, plain_for_b), ("b", x_b_hat, plain_for_a)):
            self._seen[f"{name}_g"][rows] = gen.values.detach().float().cpu()
            self._seen[f"{name}_r"][rows] = (gen.values.double() - plain.values.double() / 2).float().cpu()

    # --- Algorithm 1 ------------------------------------------------------------------------------------
    def run_round(self) -> dict:
        self.round += 1
        o = self.options
        if self.alignment is None:
            self.align(self.round)
        al, ch, r, a, b = self.alignment, self.channel, self.round, self.a, self.b
        k = int(np.random.default_rng(seed_for(self.seed, r, 0xF1)).integers(o.folds))
        start = time.perf_counter()
        logs = [self.dual_epoch(e) for e in range(o.dual_epochs)]
        dual_seconds = (time.perf_counter() - start) / max(o.dual_epochs, 1)
        # D_P: B completes its B-only rows with g and sends A its generated features of them
        x_a_of_b_only = ch.send(b.infer(b.x[al["b_only"]], "a", r)).values
        # the split network's bottoms take each party's rows centred on its own means (local, eq. 18 inputs)
        xa_c, xb_c, y_c = a.local(a.x[al["a_rows"]]), b.local(b.x[al["b_rows"]]), b.labels[al["b_rows"]]
        xa_p, xb_p, y_p = a.local(x_a_of_b_only), b.local(b.x[al["b_only"]]), b.labels[al["b_only"]]
        train, val = al["fold"] != k, al["fold"] == k
        m_c, m_d = self.central(1), self.central(2)
        self.fit_central(m_c, {"a": xa_c[train], "b": xb_c[train]}, y_c[train], 1)
        both = {"a": torch.cat([xa_c[train], xa_p]), "b": torch.cat([xb_c[train], xb_p])}
        self._loss = self.fit_central(m_d, both, torch.cat([y_c[train], y_p]), 2)
        val_inputs = {"a": xa_c[val], "b": xb_c[val]}
        v_c = self.task.metric(m_c.predict(val_inputs, ch, r), y_c[val].cpu())  # scored on the CPU
        v_d = self.task.metric(m_d.predict(val_inputs, ch, r), y_c[val].cpu())
        final = v_d - v_c > o.threshold or r >= o.iterations
        if final:  # Algorithm 1 returns: refit M_C on D_C and M_D on D_C ∪ D_P
            if v_d - v_c > o.threshold:
                self.stopped = f"V_D - V_C = {v_d - v_c:.3f} > T = {o.threshold}"
            m_c, m_d = self.central(3), self.central(4)
            self.fit_central(m_c, {"a": xa_c, "b": xb_c}, y_c, 3)
            full = {"a": torch.cat([xa_c, xa_p]), "b": torch.cat([xb_c, xb_p])}
            self._loss = self.fit_central(m_d, full, torch.cat([y_c, y_p]), 4)
        test = {"a": a.local(a.test), "b": b.local(b.test)}
        self.F["test"] = m_d.predict(test, ch, r)
        joint_t = self.task.metric(m_c.predict(test, ch, r), self.labels["test"])
        # MPDL_A: A completes its A-only rows with f and sends B its generated features of them
        x_a_only = a.x[al["a_only"]]
        x_b_of_a_only = ch.send(a.infer(x_a_only, "b", r)).values
        self.F["a_only"] = m_d.predict({"a": a.local(x_a_only), "b": b.local(x_b_of_a_only)}, ch, r)
        self.scores.update(
            joint_t=joint_t,
            dual_t=self.task.metric(self.F["test"], self.labels["test"]),
            mpdl_a=self.task.metric(self.F["a_only"], self.labels["a_only"]),
            v_c=v_c,
            v_d=v_d,
            dual_seconds_per_epoch=dual_seconds,
            **{f"{key}_loss": logs[-1][key] for key in ("align_a", "align_b", "dual")},
            **self.inference_error(x_a_of_b_only, x_b_of_a_only),
            **self.privacy_attack(x_a_of_b_only, x_b_of_a_only),
        )
        return self._record(fold=k, final=final, scores=dict(self.scores))

    def inference_error(self, x_a_hat: Tensor, x_b_hat: Tensor) -> dict[str, float]:
        """Section IV-F: MAE of each party's inference of the other's rows against the raw (normalized)
        features, and of the DP perturbation itself (raw vs h₀'s output)."""
        err_a = (x_a_hat.cpu() - self.a.h0.normalize(self.truth["a_features_of_b_only"])).abs()
        err_b = (x_b_hat.cpu() - self.b.h0.normalize(self.truth["b_features_of_a_only"])).abs()
        return {
            "inference_mae_a": float(err_a.mean()),
            "inference_mae_b": float(err_b.mean()),
            "inference_mae": float(torch.cat([err_a.flatten(), err_b.flatten()]).mean()),
            "perturbation_mae": float(
                (self.a.noise_mae * self.a.dim + self.b.noise_mae * self.b.dim) / (self.a.dim + self.b.dim)
            ),
        }

    def privacy_attack(self, x_a_of_b_only: Tensor, x_b_of_a_only: Tensor) -> dict[str, float]:
        """How well each party can rebuild the other's normalized training rows (:mod:`vcl.attacks`; MAE in
        normalized units, entry-weighted over both parties; ``_a``: the rows of A, attacked by B):

        - ``h0_attack_mae``: from all of the target's h₀ outputs and its released means (the worst case: in
          the protocol only the co-occurring rows' h₀ outputs can be read off the plaintext gradients);
        - ``attack_mae``: from what actually crossed. Co-occurring rows: the attacker's own generation of them
          and the h₀ outputs it reads off the gradient it got back (:meth:`_observe`), alone or combined;
          the target's other rows: the generation the target sent of the attacker's features, put through the
          attacker's own dual model (for B: g(f(h₀(x^A)))); ``attack_mae_overlap``: the co-occurring rows alone;
        - ``trivial_mae``: guessing each feature's mean.
        """
        al = self.alignment
        out, sizes, overlap = {}, {}, {}
        seen = self._seen
        for target, attacker, rows, only, received in (
            (self.a, self.b, al["a_rows"], al["a_only"], x_b_of_a_only),
            (self.b, self.a, al["b_rows"], al["b_only"], x_a_of_b_only),
        ):
            clean, name = self.clean[target.name], target.name
            scale = target.h0.entry_scale if target.h0.private else 0.0
            means = target.means.cpu()
            out[f"h0_attack_mae_{name}"] = h0_attack(target.x.cpu(), clean, scale, means)["mae"]
            out[f"trivial_mae_{name}"] = trivial_mae(clean)
            sources = {}  # empty if nothing crossed for these rows: then the attacker has only the means
            if seen is not None and not torch.isnan(seen[f"{name}_r"]).any():
                sources = {"gradient": seen[f"{name}_r"], "generated": seen[f"{name}_g"]}
            out[f"attack_mae_overlap_{name}"] = reconstruction_attack(sources, clean[rows], scale, means)["mae"]
            total = out[f"attack_mae_overlap_{name}"] * len(rows)
            if len(only):
                with torch.no_grad():
                    estimate = {"generated": attacker._generate(received).cpu()}
                total += reconstruction_attack(estimate, clean[only], scale, means)["mae"] * len(only)
            out[f"attack_mae_{name}"] = total / (len(rows) + len(only))
            sizes[name], overlap[name] = clean.numel(), len(rows) * target.dim
        for key, weights in (
            ("h0_attack_mae", sizes),
            ("attack_mae", sizes),
            ("trivial_mae", sizes),
            ("attack_mae_overlap", overlap),
        ):
            out[key] = sum(out[f"{key}_{p}"] * n for p, n in weights.items()) / sum(weights.values())
        return out


class FederatedTransfer(PartialOverlapProtocol):
    """FTL_A (Section IV-B, after Liu et al. [11]): per-party stacked autoencoders mapped to a common space.
    B's code learns to carry the label through C's classifier on B's labeled rows (FTL's supervised loss:
    codes to C, gradients back, as in the split network); on D_C both codes are pulled together (FTL's
    alignment loss); each party also reconstructs its rows. C's classifier then scores A's codes of the
    A-only rows (FTL_A) and of the test rows."""

    name = "ftl"
    max_rounds = 1
    uses_dual = False

    @staticmethod
    def autoencoder(party: DualParty, code: int, seed: int) -> tuple[nn.Module, nn.Module]:
        mid = (party.dim + code) // 2
        return seeded_mlp(party.dim, code, mid, seed), seeded_mlp(code, party.dim, mid, seed + 1)

    def _step(self, optimizer: torch.optim.Optimizer, loss: Tensor) -> None:
        optimizer.zero_grad()
        loss.backward()
        if self.options.dual_clip > 0:  # the same local optimizer choice as the dual models'
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, self.options.dual_clip)
        optimizer.step()

    def run_round(self) -> dict:
        self.round = r = 1
        self.align(r)
        o, al, ch, a, b, k = self.options, self.alignment, self.channel, self.a, self.b, self.task.num_outputs
        code = o.ftl_dim or min(64, max(2, min(a.dim, b.dim) // 2))
        enc_a, dec_a = self.autoencoder(a, code, seed_for(self.seed, 0xEA))
        enc_b, dec_b = self.autoencoder(b, code, seed_for(self.seed, 0xEB))
        # C's classifier: the MLP of MPDL's central model (one hidden layer of (d_A + d_B + K)/2) on the codes
        clf = seeded_mlp(code, k, o.hidden or (a.dim + b.dim + k) // 2, seed_for(self.seed, 0xC1))
        for module in (enc_a, dec_a, enc_b, dec_b, clf):  # the parties' and C's device (one for all here)
            module.to(o.device)
        opt_a = torch.optim.SGD([*enc_a.parameters(), *dec_a.parameters()], lr=o.lr)
        opt_b = torch.optim.SGD([*enc_b.parameters(), *dec_b.parameters()], lr=o.lr)
        opt_c = torch.optim.SGD(clf.parameters(), lr=o.lr)
        xa, xb = a.local(a.x), b.local(b.x)
        labeled = np.concatenate([al["b_rows"], al["b_only"]])
        y = ch.send(Labels("b", COLLABORATOR, r, as_classes(b.labels[labeled], k))).values.to(o.device).long()
        gen = torch.Generator().manual_seed(seed_for(self.seed, 0xF7))
        losses = []
        for _ in range(max(o.dual_epochs, o.central_epochs)):
            losses = []
            # supervised: B's codes of its labeled rows to C, C's gradients back to B
            for batch in torch.randperm(len(labeled), generator=gen).split(o.batch_size):
                x = xb[labeled[batch.numpy()]]
                u = enc_b(x)
                leaf = ch.send(Activations("b", COLLABORATOR, r, u.detach())).values.clone().requires_grad_(True)
                loss = nn.functional.cross_entropy(clf(leaf), y[batch])
                self._step(opt_c, loss)
                delta = ch.send(ActivationGradient(COLLABORATOR, "b", r, as_float(leaf.grad))).values
                self._step(opt_b, (dec_b(u) - x).pow(2).sum(1).mean() + (u * delta).sum())
                losses.append(float(loss.detach()))
            # alignment on D_C: each party's code pulled towards the other's, with reconstruction
            for batch in torch.randperm(len(al["a_rows"]), generator=gen).split(o.batch_size):
                ia, ib = al["a_rows"][batch.numpy()], al["b_rows"][batch.numpy()]
                u_a, u_b = enc_a(xa[ia]), enc_b(xb[ib])
                code_b = ch.send(Activations("b", "a", r, u_b.detach())).values
                code_a = ch.send(Activations("a", "b", r, u_a.detach())).values
                for u, x, dec, other, opt in ((u_a, xa[ia], dec_a, code_b, opt_a), (u_b, xb[ib], dec_b, code_a, opt_b)):
                    self._step(opt, (dec(u) - x).pow(2).sum(1).mean() + (u - other).pow(2).sum(1).mean())
        self._loss = float(np.mean(losses))
        with torch.no_grad():
            test_codes = ch.send(Activations("a", COLLABORATOR, r, enc_a(a.local(a.test)))).values
            a_only_codes = ch.send(Activations("a", COLLABORATOR, r, enc_a(xa[al["a_only"]]))).values
            b_test_codes = enc_b(b.local(b.test))  # diagnostics only (never sent): does B's code carry the label?
            self.F["test"] = clf(test_codes).cpu()
            self.F["a_only"] = clf(a_only_codes).cpu()
            self.scores.update(
                ftl_a=self.task.metric(self.F["a_only"], self.labels["a_only"]),
                code_dim=code,
                ftl_b_test=self.task.metric(clf(b_test_codes).cpu(), self.labels["test"]),
                code_std_a=float(test_codes.std(0).mean()),
                code_std_b=float(b_test_codes.std(0).mean()),
                code_gap=float((test_codes - b_test_codes).norm(dim=1).mean()),
            )
        return self._record(scores=dict(self.scores))
