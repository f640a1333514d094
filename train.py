#!/usr/bin/env python
"""vcl's command line: one config in, one run out.

    python train.py                                   # GAL on wine, 8 organizations, linear, 10 rounds
    python train.py --config configs/gal_diabetes.yaml --seed 1 --out runs/diabetes_s1
    python train.py --out runs/x --resume              # continue an interrupted run

Writes results.json, TensorBoard events (tensorboard/) and a checkpoint per round (checkpoints/)
under the run directory.
"""

from __future__ import annotations

import argparse
import sys

import yaml


def parser() -> argparse.ArgumentParser:
    from vcl.config import RunConfig

    p = argparse.ArgumentParser(
        description="Train a vertical collaborative learning method (default: GAL on wine, M=8).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--config", help="YAML file of options (see configs/); flags override it")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--quiet", action="store_true", help="print only the final summary")
    for name, f in RunConfig.fields().items():
        default = f.default_factory() if callable(f.default_factory) else f.default
        nargs = "*" if isinstance(default, list) else None
        p.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            nargs=nargs,
            default=argparse.SUPPRESS,
            metavar=name.upper(),
            help=f"{f.metadata['help']} (default: {default!r})",
        )
    return p


def main(argv: list[str] | None = None) -> int:
    args = vars(parser().parse_args(argv))
    from vcl.config import RunConfig
    from vcl.errors import VCLInputError
    from vcl.runner import train

    try:
        cfg = RunConfig.from_yaml(args.pop("config")) if args.get("config") else RunConfig()
        args.pop("config", None)
        resume, quiet = args.pop("resume"), args.pop("quiet")
        overrides = {}
        for k, v in args.items():
            overrides[k] = [yaml.safe_load(x) for x in v] if isinstance(v, list) else yaml.safe_load(v)
        cfg = RunConfig.from_dict({**cfg.to_dict(), **overrides}, source="command line")
        train(cfg, resume=resume, verbose=not quiet)
    except VCLInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
