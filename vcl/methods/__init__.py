"""The method families, one package each: GAL (and its AL / Alone / Joint configurations, Late and Interm fusion)
and ASCII, run at Alice; DC analysis (and its Centralized / Local references), run at the DC master; MPDL (and its
FTL reference) between two partly overlapping parties and a collaborator. Each package's ``__init__`` holds its
:class:`vcl.family.Family`; :mod:`vcl.registry` names them, and a run imports only its own family's package (a GAL
run never imports what DC analysis or MPDL need: scikit-learn, SciPy, Paillier). Beside them, what the two
column-view families (GAL and ASCII) share: :mod:`vcl.methods.columns` (their parties' plan and data) and
:mod:`vcl.methods.organization` (their party, an organization)."""
