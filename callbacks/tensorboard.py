"""TensorBoard logging per round, one TensorBoard run per method under ``<out>/tensorboard/<method>/`` (the
main method and each comparison method beside it, so GAL and Alone overlay): train loss, metric on every
split, η, assistance weights, bytes per round and per message kind, seconds per round (GAL's: each
organization's fit and Alice's own), ASCII's model weight α of every agent
and its interchange bytes, and a protocol's further scores (DC: NMI, Dice_t, AMD, EMD) under ``scores/``. At
the end of a run, its settings and final figures go to the HParams tab."""

from __future__ import annotations

from vcl.callbacks.base import RoundCallback

from vcl.config import flatten
from vcl.storage.logs import after_last_event_file


def hparams_of(config: dict) -> dict:
    """The run's settings as TensorBoard takes them, by dotted name: numbers, booleans and strings (a list as
    its text)."""

    out = {}
    for key, value in flatten(config).items():
        if isinstance(value, bool | int | float | str):
            out[key] = value
        elif isinstance(value, list | tuple):
            out[key] = ",".join(map(str, value))
    return out


def privacy_figures(section: dict) -> dict[str, float]:
    """The audit's figures as TensorBoard tags: each attack's score, baseline and the attacker's own data alone
    (``privacy/<attack>/<receiver> of <target>[/<k> known]``), what the messages add on the worst pair and the mean
    per secret (``privacy/share/<secret>/<k> known``), and each budget's ε (``privacy/epsilon/<mechanism>``)."""
    out = {}
    for a in section.get("attacks", []):
        known = f"/{a['known']} known" if a.get("known") else ""
        tag = f"privacy/{a['attack']}/{a['receiver']} of {a['target']}{known}".replace(" ", "_")
        out[tag], out[tag + "/baseline"] = a["score"], a["baseline"]
        if a.get("own") is not None:
            out[tag + "/own_data_alone"] = a["own"]
    for e in section.get("exposure", []):
        tag = f"privacy/share/{e['secret']}/{e['known']} known".replace(" ", "_")
        out[tag + "/worst"], out[tag + "/mean"] = e["worst"], e["mean"]
    for b in section.get("budget", []):
        if b.get("private"):
            out[f"privacy/epsilon/{b['mechanism']}".replace(" ", "_")] = b["epsilon"]
    return out


class TensorBoardRounds(RoundCallback):
    """``fresh``: the run starts at round 0 whatever was logged before (a comparison run, rerun in full)."""

    def __init__(self, subdir: str = "tensorboard", fresh: bool = False):
        self.subdir, self.fresh = subdir, fresh
        self.writer = None

    def folder(self, run):
        return run.out_dir / self.subdir / run.protocol.name

    def on_run_start(self, run) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step drops events a crashed run logged after its last checkpoint (all of them, if fresh).
        purge = 0 if self.fresh else run.protocol.round + 1
        after_last_event_file(self.folder(run))
        self.writer = SummaryWriter(str(self.folder(run)), purge_step=purge)

    def on_round_end(self, run, record: dict) -> None:
        w, t = self.writer, record["round"]
        w.add_scalar("loss/train", record["train_loss"], t)
        for split, value in record["metrics"].items():
            w.add_scalar(f"{run.metric_name}/{split}", value, t)
        for split, value in record.get("auroc", {}).items():  # binary tasks
            w.add_scalar(f"auroc/{split}", value, t)
        w.add_scalar("comm/bytes_sent", record["bytes_sent"], t)
        if t > 0:  # round 0 is the start, F⁰: nothing timed
            w.add_scalar("time/round_seconds", run.round_seconds[t - 1], t)
        for kind, nbytes in run.protocol.federation.channel.bytes_by_kind(t).items():
            w.add_scalar(f"comm/bytes_by_kind/{kind}", nbytes, t)
        etas = record.get("eta")
        if etas is not None:
            for i, eta in enumerate(etas if isinstance(etas, list) else [etas]):
                w.add_scalar("eta" if not isinstance(etas, list) else f"eta/step{i}", eta, t)
        for name, weight in zip(run.protocol.federation.members, record.get("weights", []), strict=False):
            w.add_scalar(f"assistance_weight/{name}", weight, t)
        for name, seconds in zip(run.protocol.federation.members, record.get("fit_seconds", []), strict=False):
            w.add_scalar(f"time/fit_seconds/{name}", seconds, t)
        if "alice_seconds" in record:
            w.add_scalar("time/alice_seconds", record["alice_seconds"], t)
        for name, alpha in zip(run.protocol.federation.members, record.get("alphas", []), strict=False):
            w.add_scalar(f"alpha/{name}", alpha, t)
        if "interchange_bytes" in record:
            w.add_scalar("comm/interchange_bytes", record["interchange_bytes"], t)
        for name, value in record.get("scores", {}).items():
            w.add_scalar(f"scores/{name}", value, t)
        w.flush()

    def on_run_end(self, run, results: dict) -> None:
        """The run's settings and final figures in the HParams tab (its own run folder)."""
        from torch.utils.tensorboard.summary import hparams

        settings = {**hparams_of(run.config.to_dict()), "method": results["method"]}
        figures = {
            "final/value": results["value"],
            "final/best_value": results["best_value"],
            **({"final/auroc": results["auroc"]["test"]} if "test" in results.get("auroc", {}) else {}),
            "final/bytes_sent": results["bytes_sent"],
            "final/seconds": results["seconds"],
            **privacy_figures(results.get("privacy", {})),
        }
        # The rounds' writer, not a second one: TensorBoard reads a folder's files in name order, and a second
        # file made in the same second can sort first (its counter compared as text: "10" < "9"); the rounds'
        # file, read after it, would then purge these figures (its start marks step 0 or the resumed round).
        w = self.writer
        for summary in hparams(settings, figures):
            w.file_writer.add_summary(summary)
        for tag, value in figures.items():
            w.add_scalar(tag, value, results["value_round"])
        w.flush()

    def teardown(self, run) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
