"""One error type for bad input, raised before any work starts."""


class VCLInputError(ValueError):
    """Bad input: the message names the input and says how to fix it."""
