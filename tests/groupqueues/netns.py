"""Hosts for tests: Linux network namespaces joined to this one by veth pairs
(``ip netns``, root only), and a TCP forwarder that carries their database
connections to PostgreSQL, which listens on 127.0.0.1 only.

Each host is a namespace with one veth pair: ``10.231.S.(4i+1)/30`` on this
side, ``10.231.S.(4i+2)/30`` inside (S from this process's id, so that two
test runs on one machine do not share a subnet). A process started with
``Host.command`` sees only its own loopback and that link: its one way to the
database is the forwarder on this side's address. Everything is removed on
leaving ``hosts()``, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


class Unavailable(Exception):
    """Namespaces cannot be made here (the message says why)."""


@dataclass(frozen=True)
class Host:
    namespace: str
    gateway: str  # this side of the veth pair: what the host reaches us at
    address: str  # the host's own address

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the host (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespace, *argv]


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise Unavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")


def check_available() -> None:
    """Raise :class:`Unavailable` unless this process can make namespaces."""
    if os.geteuid() != 0:
        raise Unavailable("network namespaces need root (ip netns add)")
    if shutil.which("ip") is None:
        raise Unavailable("no `ip` command (iproute2) to make network namespaces")


def remove_strays() -> None:
    """Remove the namespaces of earlier runs whose process is gone (killed
    before it could clean up: ``dq<pid>h<i>``, pids of this machine)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)
    for line in listed.stdout.splitlines():
        match = re.fullmatch(r"dq(\d+)h\d+", line.split(" ")[0])
        if match and not any(
            pid % 100000 == int(match[1])
            for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
        ):
            subprocess.run(["ip", "netns", "del", match[0]], capture_output=True)


@contextlib.contextmanager
def hosts(count: int) -> Iterator[list[Host]]:
    """``count`` hosts (namespaces with a veth pair each), removed on exit."""
    check_available()
    remove_strays()
    tag = f"dq{os.getpid() % 100000}"
    subnet = f"10.231.{100 + os.getpid() % 150}"
    made: list[Host] = []
    try:
        for i in range(count):
            ns, outside, inside = f"{tag}h{i}", f"{tag}v{i}", f"{tag}n{i}"
            host = Host(
                namespace=ns, gateway=f"{subnet}.{4 * i + 1}", address=f"{subnet}.{4 * i + 2}"
            )
            _ip("netns", "add", ns)
            made.append(host)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", ns)
            _ip("addr", "add", f"{host.gateway}/30", "dev", outside)
            _ip("link", "set", outside, "up")
            _ip("-n", ns, "addr", "add", f"{host.address}/30", "dev", inside)
            _ip("-n", ns, "link", "set", inside, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield made
    finally:
        for i, host in enumerate(made):
            # Deleting the namespace deletes its veth end, and so the pair.
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)
            subprocess.run(["ip", "link", "del", f"{tag}v{i}"], capture_output=True)


class Forwarder:
    """Accepts TCP connections on ``listen`` (port 0: any) and joins each to
    a new connection to ``upstream``, byte for byte, until either side
    closes (then both are closed: a killed client ends its server session)."""

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.server = socket.create_server(listen)
        self.server.settimeout(0.2)
        self.port: int = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name=f"forward:{self.port}").start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed.set()
        self.server.close()
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
