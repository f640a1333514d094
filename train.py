#!/usr/bin/env python
"""vcl's command line: one config in, one run out.

    python train.py                                   # GAL on wine, 8 organizations, linear, 10 rounds
    python train.py --config configs/gal_diabetes_m8.yaml --run.seed 1 --out runs/diabetes_s1
    python train.py --out runs/x --resume              # continue an interrupted run
    python train.py --out runs/x --overwrite           # run again in a directory that holds a run
    python train.py predict --out runs/x --data.csv_files new_alice.csv new_bob.csv --predictions p.csv
    python train.py figures --out runs/x              # the finished run's curves: runs/x/figures/rounds.png
    python train.py audit --out runs/x                # what each receiver infers from what it kept; each budget

Writes results.json, TensorBoard events (tensorboard/) and a checkpoint per round (checkpoints/)
under the run directory. Bad input ends with one sentence on stderr and exit status 2; Ctrl-C or
SIGTERM ends with the last saved round and the command that resumes it.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shlex
import signal
import sys
import threading
from pathlib import Path


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C so the run stops at a consistent point."""


SWITCHES = ("--resume", "--overwrite", "--quiet")  # how to run, not what: never part of a config


def main(argv: list[str] | None = None, prog: list[str] | None = None, exiting: bool = False) -> int:
    """Run the command line ``argv``; ``prog`` is how this program was started (for the resume command it prints).
    ``exiting``: the process ends after this, so Ctrl-C and SIGTERM are ignored from the moment the run is over (a
    signal while the interpreter shuts down would otherwise end it silently with status 130 or 143)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _terminate)  # from the start: a signal while starting is one line too
    threads_hook, threading.excepthook = threading.excepthook, _quiet_write_errors
    try:
        if argv[:1] == ["predict"]:
            return _predict(argv[1:])
        if argv[:1] == ["figures"]:
            return _figures(argv[1:])
        if argv[:1] == ["audit"]:
            return _audit(argv[1:])
        return _run(argv, prog or ["python", "train.py"])
    except KeyboardInterrupt as err:  # before the rounds began: nothing was written
        how = "terminated" if isinstance(err, Terminated) else "interrupted"
        print(f"{how} before the run started.", file=sys.stderr)
        return 143 if isinstance(err, Terminated) else 130
    finally:
        if exiting:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        else:
            signal.signal(signal.SIGTERM, previous)
        threading.excepthook = threads_hook


def _run(argv: list[str], prog: list[str]) -> int:
    from vcl.config import parse_args
    from vcl.errors import OutOfMemory, PartyLost, VCLInputError

    resume, overwrite, quiet = (flag in argv for flag in SWITCHES)
    try:
        cfg = parse_args([a for a in argv if a not in SWITCHES])  # --help and --print_config exit here
        if resume and overwrite:
            raise VCLInputError("--resume and --overwrite contradict each other; pass one of them.")
    except VCLInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from vcl.datamodules.csv_files import forget_read_ahead

    from vcl.engine.memory import prepare_process

    prepare_process()
    _read_ahead(cfg)  # the organizations' files, read while torch and Lightning import (next)
    from vcl.coordinator.rundir import PREVIOUS
    from vcl.coordinator.runner import RunInterrupted, train

    again = shlex.join([*prog, *[a for a in argv if a not in ("--overwrite", "--resume")], "--resume"])
    try:
        train(cfg, resume=resume, overwrite=overwrite, verbose=not quiet)
    except VCLInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except PartyLost as err:
        where = "nothing was saved yet" if err.saved_round is None else f"round {err.saved_round} is saved"
        print(f"error: {err}; {where} in {err.out_dir}; resume with: {again}", file=sys.stderr)
        return 1
    except RunInterrupted as err:
        how = "terminated" if isinstance(err.__context__, Terminated) else "interrupted"
        if err.completed:  # the signal came after the results were written: nothing to resume
            print(f"{how} after the run completed (results in {err.out_dir / 'results.json'}).", file=sys.stderr)
            return 143 if how == "terminated" else 130
        where = "before round 0 was saved" if err.saved_round is None else f"after round {err.saved_round}"
        kept = ""
        if err.saved_round is not None and (err.out_dir / PREVIOUS).is_dir():
            kept = f"; the outputs it replaces stay in {err.out_dir / PREVIOUS} until it completes"
        print(f"{how} {where} (checkpoint in {err.out_dir}{kept}); resume with: {again}", file=sys.stderr)
        return 143 if how == "terminated" else 130
    except OSError as err:  # the run directory removed, made read-only or full while the run wrote to it
        what = os.fsdecode(err.filename) if err.filename is not None else cfg.run_dir
        hint = "then run again (with --resume if a round was saved)"
        if overwrite and not (cfg.run_dir / PREVIOUS).is_dir():
            hint = "then run again with --overwrite (the outputs it was replacing are back in place)"
        print(
            f"error: {what}: {err.strerror or type(err).__name__}; make sure --out {cfg.run_dir} stays in place, "
            f"writable and with room to spare, {hint}.",
            file=sys.stderr,
        )
        return 1
    except OutOfMemory:
        print(
            "error: the run ran out of memory; make the models or batches smaller (learner.hidden, "
            "learner.cnn_widths, learner.batch_size, data.max_train) or free memory, then run again (a fresh run's "
            "outputs are taken back).",
            file=sys.stderr,
        )
        return 1
    finally:
        forget_read_ahead()
    return 0


def _read_ahead(cfg) -> None:
    """Where this process reads every organization's CSV or Parquet file (``transport: local``, columns a GAL-family
    or ASCII method reads), begin reading them in a thread while the imports of torch and Lightning take one core
    (:func:`vcl.datamodules.csv_files.read_ahead`; the data module takes the table, or its error sentence)."""
    d = cfg.data
    if d.dataset != "csv" or d.module or not d.csv_files or cfg.transport.kind != "local":
        return
    from vcl.datamodules.csv_files import read_ahead

    read_ahead(d.csv_files, d.id_column, d.label_column, d.task or None, d.categorical, d.missing)


def _predict(argv: list[str]) -> int:
    """``train.py predict``: a finished run's models score new people (:mod:`vcl.use.predict`)."""

    from vcl.errors import one_sentence
    from vcl.use.predict import add_run_arguments, predict

    parser = argparse.ArgumentParser(
        prog="train.py predict",
        description="Score new people with a finished run's kept models; write a CSV of the predictions.",
    )
    add_run_arguments(parser)
    parser.add_argument("--predictions", required=True, help="the CSV to write (a new file)")
    parser.add_argument("--quiet", action="store_true", help="print nothing on success")
    args = parser.parse_args(argv)
    out, again = Path(args.predictions), "nothing was written; run predict again once every party is up."
    work = lambda: predict(args.out, args.files, out, not args.quiet, args.missing, args.allow_classes)  # noqa: E731
    return one_sentence(work, again)


def _figures(argv: list[str]) -> int:
    """``train.py figures``: a finished run's curves as a picture (:mod:`vcl.use.figures`)."""

    from vcl.errors import one_sentence
    from vcl.use.figures import draw_run

    parser = argparse.ArgumentParser(
        prog="train.py figures", description="Draw a finished run's curves per round (from its results.json)."
    )
    parser.add_argument("--out", required=True, help="the run's directory (its --out)")
    parser.add_argument("--png", default=None, help="where to write the picture (default: <out>/figures/rounds.png)")
    args = parser.parse_args(argv)
    return one_sentence(lambda: print(f"wrote {draw_run(Path(args.out), args.png and Path(args.png))}"), "")


def _audit(argv: list[str]) -> int:
    """``train.py audit``: the attacks that apply to a finished run, on what its receivers kept (:mod:`vcl.audit.run`),
    and each noise's budget, written into its results.json's privacy section."""

    from vcl.errors import one_sentence

    parser = argparse.ArgumentParser(
        prog="train.py audit",
        description="Attack what each receiver of a finished run kept; write the scores and budgets into results.json.",
    )
    parser.add_argument("--out", required=True, help="the run's directory (its --out)")
    parser.add_argument("--known", type=int, nargs="+", default=[0, 10, 40],
                        help="the counts of rows whose labels or features an attacker knows, each tried (0: the "
                             "attacks that need none only)")  # fmt: skip
    args = parser.parse_args(argv)
    from vcl.errors import VCLInputError

    def work() -> None:
        from vcl.audit.run import audit, strongest

        if any(k == 1 or k < 0 for k in args.known):
            bad = next(k for k in args.known if k == 1 or k < 0)
            raise VCLInputError(f"--known {bad}: an attacker knows 0 rows or at least 2; pass 0 or 2 or more.")
        section = audit(Path(args.out), known=tuple(args.known))
        for line in strongest(section) or ["privacy: no attack applies to what this run kept"]:
            print(line)
        print(f"wrote the privacy section of {Path(args.out) / 'results.json'}")

    return one_sentence(work, "")


def _quiet_write_errors(args) -> None:
    """A writer thread's failed write (TensorBoard's, when --out is removed or full) is said once, in one sentence,
    by the run itself, which meets the same error at its next write; other thread errors print as usual."""
    if not issubclass(args.exc_type, OSError):
        threading.__excepthook__(args)


def _terminate(signum, frame):
    raise Terminated()


def _end(status: int) -> None:
    """End the process with ``status`` once ``main`` returned, as the interpreter would (threads done, exit functions
    run, output flushed) but without its teardown of every module, which takes over a second once torch and
    Lightning are imported, whatever the run (docs/development.md). While a thread still works, the usual exit."""
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(status)
    atexit._run_exitfuncs()  # what the interpreter runs at exit, libraries' and site's alike
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


if __name__ == "__main__":
    _end(main(prog=[sys.executable, sys.argv[0]], exiting=True))  # the resume command names this interpreter
