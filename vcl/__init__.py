"""vcl: vertical collaborative learning.

Organizations hold different features of the same individuals; Alice holds the labels. The protocols in
:mod:`vcl.methods` let the others assist her through typed messages (:mod:`vcl.messages`) without sharing raw data,
models or objective functions."""

from vcl.errors import VCLInputError

__all__ = ["VCLInputError"]
__version__ = "0.1.0"
