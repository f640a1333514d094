#!/usr/bin/env python
"""vcl's command line: one config in, one run out.

    python train.py                                   # GAL on wine, 8 organizations, linear, 10 rounds
    python train.py --config configs/gal_diabetes_m8.yaml --run.seed 1 --out runs/diabetes_s1
    python train.py --out runs/x --resume              # continue an interrupted run
    python train.py --out runs/x --overwrite           # run again in a directory that holds a run

Writes results.json, TensorBoard events (tensorboard/) and a checkpoint per round (checkpoints/)
under the run directory. Bad input ends with one sentence on stderr and exit status 2; Ctrl-C or
SIGTERM ends with the last saved round and the command that resumes it.
"""

from __future__ import annotations

import shlex
import signal
import sys


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C so the run stops at a consistent point."""


SWITCHES = ("--resume", "--overwrite", "--quiet")  # how to run, not what: never part of a config


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from vcl.config import parse_args
    from vcl.errors import PartyLost, VCLInputError

    resume, overwrite, quiet = (flag in argv for flag in SWITCHES)
    try:
        cfg = parse_args([a for a in argv if a not in SWITCHES])  # --help and --print_config exit here
        if resume and overwrite:
            raise VCLInputError("--resume and --overwrite contradict each other; pass one of them.")
    except VCLInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from vcl.memory import reuse_freed_memory
    from vcl.runner import RunInterrupted, train

    reuse_freed_memory()
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
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
