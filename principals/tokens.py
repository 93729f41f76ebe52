"""Token secrets: generation and hashing (only the hash is stored)."""

import hashlib
import secrets

SECRET_PREFIX = "dq_"
PREFIX_LENGTH = 11  # "dq_" + 8 characters, shown in listings to tell tokens apart


def new_secret() -> str:
    """A fresh secret: ``dq_`` and 43 URL-safe characters (256 random bits)."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """SHA-256 hex of the secret. Secrets carry 256 random bits, so a fast hash
    is safe here (no password stretching needed)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
