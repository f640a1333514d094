"""What a run writes, on either side: checkpoint files (written atomically, loaded as data only) and log folders."""
