"""The method families, one package each (GAL, ASCII, DC, MPDL), each ``__init__`` holding its
:class:`vcl.family.Family`; a run imports only its own family's package. Beside them what GAL and ASCII share:
:mod:`vcl.methods.columns` and :mod:`vcl.methods.organization`. Layout: docs/design.md."""
