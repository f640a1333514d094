"""Alice's side: the runner (one config in, one run out), the run builder, the run directory, the federation as the
coordinator sees it, what results.json reports, and many runs at once (sweeps)."""
