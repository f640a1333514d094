"""The transports that carry messages between the coordinator and the parties: local (this process), ray (an
actor per party) and grpc (mutual TLS to parties on their own machines: its wire format and certificates), and the
loopback federation (party processes on 127.0.0.1) that tries grpc on one machine. The contract is
:mod:`vcl.transport`."""
