"""Who scores an MPDL or FTL run from outside it: the raw data, the parties' reports, the attacks."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import Tensor, nn

from vcl.datamodules.overlap import OverlapData, PartyData
from vcl.engine.loop import seed_for
from vcl.engine.privacy import FeatureDPLayer
from vcl.engine.split_network import COLLABORATOR
from vcl.engine.tasks import Task
from vcl.messages import Ack, Message, Step
from vcl.methods.experimenter import Experimenter
from vcl.methods.mpdl.attacks import h0_attack, reconstruction_attack, trivial_mae
from vcl.methods.mpdl.messages import Report
from vcl.methods.mpdl.options import PARTIES, MPDLOptions, seeded_mlp

BLIND = 0xB11D  # the control of the redraw attack: seeds derived from this, which no config holds


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


class OverlapExperimenter(Experimenter):
    """Who scores an MPDL or FTL run from outside it: the raw features of the rows only one party holds and
    each party's clean normalized rows (:attr:`OverlapData.truth`), and the parties' reports."""

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

    def a_only_rows(self) -> dict[str, Tensor]:
        """The experimenter's view of the rows only A holds, in A's row order and normalized units, once an mpdl run's
        parties have reported: ``original`` (A's and B's raw features side by side), ``completed`` (A's h₀ outputs
        beside B's columns as A's dual model f made them) and ``labels``. For Figure 8; no party sees it."""
        a, b = self.reports["a"], self.reports["b"]
        b_true = self.h0["b"].normalize(self.truth["b_features_of_a_only"])
        return {
            "original": torch.cat([self.clean["a"][a["only"]], b_true], 1),
            "completed": torch.cat([a["x"][a["only"]], b["filled"]], 1),
            "labels": self.truth["a_only_labels"],
        }

    def privacy_attack(self) -> dict[str, float]:
        """How well each party can rebuild the other's normalized training rows (:mod:`.attacks`; MAE, entry-weighted
        over both parties; ``_a``: the rows of A, attacked by B): ``h0_redraw_mae``, ``h0_blind_mae``,
        ``h0_attack_mae``, ``attack_mae``, ``attack_mae_overlap``, ``trivial_mae`` (docs/mpdl.md, "The attack")."""
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
        """As many seeds as :meth:`redraw_seeds`, from a constant no config holds: ``h0_redraw_mae`` near
        ``h0_blind_mae`` says the seeds the receiver knows give it nothing beyond redrawing at random."""
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
        weights = c["classifier"]  # C's MLP as its weights: rebuilt here with their shapes
        layers = [w for name, w in weights.items() if name.endswith("weight")]
        clf = seeded_mlp(layers[0].shape[1], layers[-1].shape[0], layers[0].shape[0], 0)
        clf.load_state_dict(weights)
        with torch.no_grad():
            scores = clf.to(codes_b.device)(codes_b)
        return {
            "ftl_b_test": self.task.metric(scores, self.test_labels),
            "code_std_a": float(codes_a.std(0).mean()),
            "code_std_b": float(codes_b.std(0).mean()),
            "code_gap": float((codes_a - codes_b).norm(dim=1).mean()),
        }
