"""A demo module without DEMO_ORDER, for tests/queueproject/test_seed_demo.py."""


def seed(*, admin_user: object, log: object) -> None:
    """Seeds nothing."""
