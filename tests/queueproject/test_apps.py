"""What the shared layer's AppConfig wires at start-up."""

from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer


def test_runserver_sends_responses_without_waiting_for_acks():
    """TCP_NODELAY on runserver's connections: with Nagle's algorithm its
    several small writes per response waited ~40 ms for a delayed ACK each."""
    assert WSGIRequestHandler.disable_nagle_algorithm is True


def test_runserver_queues_a_burst_of_connections():
    """A listen backlog of 10 (Django's) overflowed with 64 clients connecting
    at once: the kernel reset some of their connections."""
    assert WSGIServer.request_queue_size >= 128
