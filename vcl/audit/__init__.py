"""Privacy measured alike for every method, after the run, on what each receiver kept: :mod:`vcl.audit.attacks`,
:mod:`vcl.audit.budget` and :mod:`vcl.audit.run` (``train.py audit``, ``run.audit``). Threat model: docs/privacy.md."""
