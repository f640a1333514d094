"""What GAL's options decide of its organizations, on either side: a party's own process plans its organization from
them as Alice plans every one."""

from __future__ import annotations

from vcl.config import RunConfig
from vcl.methods.columns import ColumnOptions


def column_options(config: RunConfig) -> ColumnOptions:
    """What GAL's options decide of the organizations (its ``gal`` group): the task and local losses, the
    noninformative and noisy organizations (GAL Tables 6, 17–21), the baselines' epochs, Deep Model Sharing."""
    g = config.gal
    return ColumnOptions(
        task_loss=g.task_loss,
        local_loss=tuple(g.local_loss),
        noninformative=tuple(g.noninformative_organizations),
        noisy=tuple(g.noisy_organizations),
        noise_sigma=g.noise_sigma,
        baseline_epochs=g.baseline_epochs,
        dms=g.dms,
    )
