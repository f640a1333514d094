"""Tools for testing a federation: the transport suite every transport passes (vcl's and yours) and the hostile
probes of a gRPC party process."""
