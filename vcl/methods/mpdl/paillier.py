"""Paillier additively homomorphic encryption for MPDL's dual loss (Section III-C2), via ``phe``.

``[[u]]·v`` and ``[[u]] + [[w]]`` decrypt to ``u·v`` and ``u + w`` to double precision (``phe``'s float encoding);
ciphertexts travel as big-endian bytes (N × 2·bytes(n), uint8) plus int32 exponents, so the ledger counts their size."""

from __future__ import annotations

import numpy as np
import torch
from phe import paillier
from phe.paillier import EncryptedNumber, PaillierPublicKey

from vcl.errors import VCLInputError


def check_key_bits(bits: int) -> int:
    if bits < 256 or bits % 8:
        raise VCLInputError(f"mpdl.key_bits={bits}; use a Paillier modulus of at least 256 bits, a multiple of 8.")
    return bits


class PaillierKeyPair:
    """A party's key pair; the private key never leaves it."""

    def __init__(self, bits: int = 1024):
        self.public, self._private = paillier.generate_paillier_keypair(n_length=check_key_bits(bits))

    def public_bytes(self) -> torch.Tensor:
        return _to_bytes([self.public.n], (self.public.n.bit_length() + 7) // 8)

    def encrypt(self, values: np.ndarray) -> list[EncryptedNumber]:
        return [self.public.encrypt(float(v)) for v in np.asarray(values, dtype=np.float64).ravel()]

    def decrypt(self, numbers: list[EncryptedNumber]) -> np.ndarray:
        return np.array([self._private.decrypt(c) for c in numbers], dtype=np.float64)


def public_key_from_bytes(t: torch.Tensor) -> PaillierPublicKey:
    return PaillierPublicKey(int.from_bytes(bytes(t[0].tolist()), "big"))


def _to_bytes(values: list[int], width: int) -> torch.Tensor:
    raw = b"".join(v.to_bytes(width, "big") for v in values)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape(len(values), width).clone()


def as_tensors(numbers: list[EncryptedNumber], public: PaillierPublicKey) -> tuple[torch.Tensor, torch.Tensor]:
    """(ciphertexts N × bytes(n²), exponents N) for a message."""
    width = (public.nsquare.bit_length() + 7) // 8
    cts = _to_bytes([c.ciphertext(be_secure=False) for c in numbers], width)
    return cts, torch.tensor([c.exponent for c in numbers], dtype=torch.int32)


def from_tensors(
    ciphertexts: torch.Tensor, exponents: torch.Tensor, public: PaillierPublicKey
) -> list[EncryptedNumber]:
    return [
        EncryptedNumber(public, int.from_bytes(bytes(row.tolist()), "big"), int(e))
        for row, e in zip(ciphertexts, exponents.tolist(), strict=True)
    ]


def scale_rows(numbers: list[EncryptedNumber], factors: np.ndarray) -> list[EncryptedNumber]:
    """``[[u_i]] · F[i, k]`` for every row i and column k, row-major: N × d ciphertexts from N."""
    factors = np.asarray(factors, dtype=np.float64)
    return [c * float(f) for c, row in zip(numbers, factors, strict=True) for f in row]
