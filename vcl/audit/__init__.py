"""Privacy measured alike for every method, after the run, on what each receiver kept.

:mod:`vcl.audit.attacks` holds the attacks (written once), :mod:`vcl.audit.budget` the accountant of each noise's
(ε, δ), :mod:`vcl.audit.run` the driver behind ``train.py audit`` and ``run.audit``: it reads a finished run's kept
messages (:mod:`vcl.storage.kept`) and asks the run's family which attacks apply (:attr:`vcl.family.Family.auditor`).
docs/privacy.md is the threat model of every method.
"""
