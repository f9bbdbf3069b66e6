"""Helpers for tests of the transport bytes (src/transport.rs): damaged data that
still passes the checksum, so the body's own checks are what is tested."""

from __future__ import annotations


def seal(body: bytes) -> bytes:
    """``body`` followed by its FNV-1a 64 checksum, little-endian (the transport's trailer)."""
    h = 0xCBF29CE484222325
    for x in body:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return body + h.to_bytes(8, "little")
