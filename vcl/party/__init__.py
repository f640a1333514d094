"""A party's side, wherever it runs: the one runtime every transport hands messages to, and a party process of its
own on its own machine (``python -m vcl.party --config own.yaml``: the gRPC server, its guard and its settings)."""
