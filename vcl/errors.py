"""One error type for bad input, raised before any work starts."""


class VCLInputError(ValueError):
    """Bad input: the message names the input and says how to fix it."""


class PartyLost(RuntimeError):
    """A party's process ended (it crashed, was killed, or its machine left) while the coordinator needed it."""

    def __init__(self, party: str, during: str):
        super().__init__(f"party {party} stopped during {during}: its process ended")
        self.party, self.during = party, during
