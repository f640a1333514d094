"""The user's own classes, named in a config by ``{class_path, init_args}``: a LightningModule as an
organization's learner (``learner.model``), Lightning callbacks for the organizations' Trainers
(``learner.callbacks``) and a vertical data module (``data.module``).

A config that names a class to import is code its author trusts, as with LightningCLI: importing a module
runs it. Checkpoints and data files never run code: a user's module is rebuilt from the config and only its
tensors (``state_dict``) are stored.

Contract of a user learner (documented in docs/usage.md): the suite calls ``cls(in_features=...,
out_features=..., **init_args)`` (``in_features``: the width of a row, or the shape of one example as a tuple
for images and sequences); ``forward(x)`` returns one row of ``out_features`` per sample; the suite fits it to
what the method sends (residuals, weighted labels) with the organization's local loss — or with the module's own
``training_step((x, target, sample_weight), batch_idx)`` when it defines one, under either engine — by the
module's own ``configure_optimizers`` when it defines one (one optimizer, with or without a scheduler), else by
the suite's optimizer settings (``learner.lr`` and the rest; unset: the MLP's). Automatic optimization only.
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch

from vcl.classpath import import_class
from vcl.classpath import parse_spec as parse  # <kind>:<class_path>{init args as JSON}
from vcl.errors import VCLInputError

PREFIX = "module:"  # learner.model: module:<class_path>{init args as JSON} (vcl.config.groups.estimator_spec)


def is_module_spec(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def module_class(spec: str, option: str = "learner.model") -> type:

    return import_class(parse(spec, option)[0], option, pl.LightningModule, "LightningModule")


def build_module(spec: str, in_shape: tuple[int, ...], out_features: int, option: str = "learner.model"):
    """A fresh user LightningModule for rows (``in_features`` an int) or examples of shape ``in_shape``."""
    path, args = parse(spec, option)
    cls = module_class(spec, option)
    in_features = in_shape[0] if len(in_shape) == 1 else tuple(in_shape)
    try:
        module = cls(in_features=in_features, out_features=out_features, **args)
    except TypeError as err:
        raise VCLInputError(
            f"{option}: {path}(in_features=..., out_features=..., **{args}) fails ({err}); it must take "
            "in_features and out_features as keyword arguments, and these init_args."
        ) from None
    if not module.automatic_optimization:
        raise VCLInputError(
            f"{option}: {path} turns automatic_optimization off; vcl steps the loss its training_step returns with "
            "its one optimizer (Lightning's automatic optimization), so leave it on."
        )
    return module


def check_module(spec: str, option: str = "learner.model") -> str:
    """Import the class before any work (a wrong path is one sentence, not a traceback in round 1)."""
    module_class(spec, option)
    return spec


def build_callbacks(specs, option: str = "learner.callbacks") -> list:
    """Fresh Lightning callbacks from ``{class_path, init_args}`` specs (one-line form ``callback:<path>{json}``)."""

    made = []
    for spec in specs:
        path, args = parse(spec, option)
        cls = import_class(path, option, pl.Callback, "Lightning callback")
        try:
            made.append(cls(**args))
        except TypeError as err:
            raise VCLInputError(f"{option}: {path}(**{args}) fails ({err}); fix its init_args.") from None
    return made


def one_optimizer(conf, where: str):
    """The optimizer and (or None) the epoch scheduler that a ``configure_optimizers`` returns, in any of
    Lightning's single-optimizer forms: an optimizer, a one-item list, ``([opt], [sched])``, or a dict with
    ``optimizer`` and ``lr_scheduler`` (a scheduler or ``{"scheduler": ...}``)."""
    sched = None
    if isinstance(conf, dict):
        conf, sched = conf.get("optimizer"), conf.get("lr_scheduler")
    elif isinstance(conf, (list, tuple)) and len(conf) == 2 and all(isinstance(c, (list, tuple)) for c in conf):
        conf, scheds = conf
        sched = scheds[0] if len(scheds) == 1 else (None if not scheds else scheds)
    if isinstance(conf, (list, tuple)) and len(conf) == 1:
        conf = conf[0]
    if isinstance(sched, dict):
        if sched.get("interval", "epoch") != "epoch":
            raise VCLInputError(
                f"{where}: configure_optimizers asks for a per-step scheduler, which the fast engine steps per epoch; "
                "give it interval 'epoch', or fit with --run.engine trainer."
            )
        sched = sched.get("scheduler")
    if not isinstance(conf, torch.optim.Optimizer) or isinstance(sched, (list, tuple)):
        raise VCLInputError(
            f"{where}: configure_optimizers must give one optimizer (and at most one scheduler); got {conf!r}."
        )
    return conf, sched
