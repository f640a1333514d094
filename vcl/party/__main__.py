"""``python -m vcl.party --config own.yaml``: one organization's party process (:mod:`vcl.party.server`)."""

import sys

from vcl.party.server import main

sys.exit(main())
