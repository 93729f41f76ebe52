"""Admin of the store primitives."""

from store import lock_admin  # noqa: F401  (registers the read-only lock list)
