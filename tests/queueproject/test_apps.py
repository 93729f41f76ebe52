"""What the shared layer's AppConfig wires at start-up."""

from django.core.servers.basehttp import WSGIRequestHandler


def test_runserver_sends_responses_without_waiting_for_acks():
    """TCP_NODELAY on runserver's connections: with Nagle's algorithm its
    several small writes per response waited ~40 ms for a delayed ACK each."""
    assert WSGIRequestHandler.disable_nagle_algorithm is True
