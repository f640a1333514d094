#!/usr/bin/env python
"""vcl's command line: one config in, one run out.

    python train.py                                   # GAL on wine, 8 organizations, linear, 10 rounds
    python train.py --config configs/gal_diabetes.yaml --seed 1 --out runs/diabetes_s1
    python train.py --out runs/x --resume              # continue an interrupted run
    python train.py --out runs/x --overwrite           # run again in a directory that holds a run

Writes results.json, TensorBoard events (tensorboard/) and a checkpoint per round (checkpoints/)
under the run directory. Bad input ends with one sentence on stderr and exit status 2; Ctrl-C or
SIGTERM ends with the last saved round and the command that resumes it.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and a hint, not the whole usage
        self.exit(2, f"error: {message}; see `python train.py --help` for the options.\n")


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C so the run stops at a consistent point."""


def parser() -> argparse.ArgumentParser:
    from vcl.config import RunConfig

    p = Parser(
        description="Train a vertical collaborative learning method (default: GAL on wine, M=8).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--config", help="YAML file of options (see configs/); flags override it")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in an --out that holds a run: removes only the suite's own outputs there",
    )
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
    argv = list(sys.argv[1:] if argv is None else argv)
    args = vars(parser().parse_args(argv))
    from vcl.config import RunConfig, parse_flag
    from vcl.errors import PartyLost, VCLInputError
    from vcl.runner import RunInterrupted, train

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        cfg = RunConfig.from_yaml(args.pop("config")) if args.get("config") else RunConfig()
        args.pop("config", None)
        resume, overwrite, quiet = args.pop("resume"), args.pop("overwrite"), args.pop("quiet")
        if resume and overwrite:
            raise VCLInputError("--resume and --overwrite contradict each other; pass one of them.")
        overrides = {
            k: [parse_flag(k, x) for x in v] if isinstance(v, list) else parse_flag(k, v) for k, v in args.items()
        }
        cfg = RunConfig.from_dict({**cfg.to_dict(), **overrides}, source="command line")
        train(cfg, resume=resume, overwrite=overwrite, verbose=not quiet)
    except VCLInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except PartyLost as err:
        again = shlex.join(
            ["python", "train.py", *[a for a in argv if a not in ("--overwrite", "--resume")], "--resume"]
        )
        where = "nothing was saved yet" if err.saved_round is None else f"round {err.saved_round} is saved"
        print(f"error: {err}; {where} in {err.out_dir}; resume with: {again}", file=sys.stderr)
        return 1
    except RunInterrupted as err:
        how = "terminated" if isinstance(err.__context__, Terminated) else "interrupted"
        again = shlex.join(
            ["python", "train.py", *[a for a in argv if a not in ("--overwrite", "--resume")], "--resume"]
        )
        where = "before round 0 was saved" if err.saved_round is None else f"after round {err.saved_round}"
        print(f"{how} {where} (checkpoint in {err.out_dir}); resume with: {again}", file=sys.stderr)
        return 143 if how == "terminated" else 130
    except KeyboardInterrupt as err:  # before the rounds began: nothing was written
        print(
            f"{'terminated' if isinstance(err, Terminated) else 'interrupted'} before the run started.", file=sys.stderr
        )
        return 143 if isinstance(err, Terminated) else 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def _terminate(signum, frame):
    raise Terminated()


if __name__ == "__main__":
    sys.exit(main())
