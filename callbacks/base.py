"""Round-level callbacks: the runner calls them at the start, after every round, at the end,
and ``teardown`` whether the rounds finished or failed."""

from __future__ import annotations


class RoundCallback:
    def on_run_start(self, run) -> None:  # run: vcl.coordinator.runner.Run
        pass

    def on_round_end(self, run, record: dict) -> None:
        pass

    def on_run_end(self, run, results: dict) -> None:
        """After the last round, before ``teardown``, with the run's own results (not its comparisons)."""
        pass

    def teardown(self, run) -> None:
        """After the rounds, whether they finished or failed: release files and writers."""
        pass
