"""Hosts of one's own: a network namespace a host, joined through a router namespace, any link cut silently.

Each host gets a veth pair to the router and a /24 of its own (10.213.N.2, the router 10.213.N.1). A cut is a
pair of `blackhole` policy rules on the router: packets leave one host and are dropped in the middle, nothing
comes back, as when a switch or a security group drops them (no reset, no ICMP: `tc netem` and iptables are
not on these machines, policy routing is). Every address exists only inside the namespaces made here, and
`close` removes every namespace, link and process made here, also after a failure. Needs root (`ip netns`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)


def available() -> bool:
    """Tell whether namespaces can be made here (root and `ip netns`)."""
    if os.geteuid() != 0:
        return False
    return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        if _LIBC.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)


class Hosts:
    """Named hosts (network namespaces) behind one router; `cut`, `isolate` and `heal` their links."""

    def __init__(self, names: list[str]) -> None:
        self.tag = "rk" + secrets.token_hex(2)  # names of this run alone: veth names have 15 characters at most
        self.router = f"{self.tag}-router"
        self.address: dict[str, str] = {}
        self._namespaces: list[str] = []
        self._processes: list[subprocess.Popen] = []
        self._rules: set[tuple[str, ...]] = set()
        try:
            self._make_namespace(self.router)
            _ip("netns", "exec", self.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            for number, name in enumerate(names, start=1):
                self._add(name, number)
            self._name_hosts()
        except BaseException:
            self.close()
            raise

    def _make_namespace(self, namespace: str) -> None:
        _ip("netns", "add", namespace)
        self._namespaces.append(namespace)
        _ip("-n", namespace, "link", "set", "lo", "up")

    def _add(self, name: str, number: int) -> None:
        namespace, inner, outer = self.namespace(name), f"{self.tag}h{number}", f"{self.tag}r{number}"
        self._make_namespace(namespace)
        _ip("link", "add", inner, "type", "veth", "peer", "name", outer)
        _ip("link", "set", inner, "netns", namespace)
        _ip("link", "set", outer, "netns", self.router)
        _ip("-n", self.router, "addr", "add", f"10.213.{number}.1/24", "dev", outer)
        _ip("-n", self.router, "link", "set", outer, "up")
        _ip("-n", namespace, "addr", "add", f"10.213.{number}.2/24", "dev", inner)
        _ip("-n", namespace, "link", "set", inner, "up")
        _ip("-n", namespace, "route", "add", "default", "via", f"10.213.{number}.1")
        self.address[name] = f"10.213.{number}.2"

    def _name_hosts(self) -> None:
        # `ip netns exec` mounts /etc/netns/NS/hosts over /etc/hosts: there a host is known as NAME.hosts.test.
        lines = ["127.0.0.1 localhost"] + [f"{address} {self.hostname(name)}" for name, address in self.address.items()]
        for namespace in self._namespaces:
            folder = Path("/etc/netns") / namespace
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hosts").write_text("\n".join(lines) + "\n")

    @staticmethod
    def hostname(name: str) -> str:
        """Return the name a host is known by on the others (processes started by `spawn`)."""
        return f"{name}.hosts.test"

    def namespace(self, name: str) -> str:
        """Return the namespace of a host."""
        return f"{self.tag}-{name}"

    def spawn(self, name: str, argv: list[str], **popen) -> subprocess.Popen:
        """Start a process on a host (its own session, so that its children stop with it)."""
        process = subprocess.Popen(["ip", "netns", "exec", self.namespace(name), *argv], start_new_session=True, **popen)
        self._processes.append(process)
        return process

    @contextlib.contextmanager
    def inside(self, name: str) -> Iterator[None]:
        """Run this thread on a host: sockets made meanwhile belong to it (setns changes the calling thread alone)."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            _setns(f"/run/netns/{self.namespace(name)}")
            try:
                yield
            finally:
                if _LIBC.setns(own, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns back")
        finally:
            os.close(own)

    def enter(self, name: str) -> None:
        """Move this thread to a host for the rest of its life (a load or receiver thread)."""
        _setns(f"/run/netns/{self.namespace(name)}")

    def _rule(self, verb: str, *selector: str) -> None:
        _ip("-n", self.router, "rule", verb, *selector, "blackhole")

    def cut(self, a: str, b: str) -> None:
        """Drop every packet between two hosts, both ways, silently."""
        for one, other in ((a, b), (b, a)):
            rule = ("from", self.address[one], "to", self.address[other])
            self._rule("add", *rule)
            self._rules.add(rule)

    def isolate(self, name: str) -> None:
        """Drop every packet to and from a host, silently; its processes keep running."""
        for rule in (("from", self.address[name]), ("to", self.address[name])):
            self._rule("add", *rule)
            self._rules.add(rule)

    def heal(self) -> None:
        """Restore every link that was cut."""
        for rule in sorted(self._rules):
            self._rule("del", *rule)
        self._rules.clear()

    def close(self) -> None:
        """Stop every process started here (its whole group), then remove the namespaces and their links."""
        for process in self._processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        for namespace in reversed(self._namespaces):  # a namespace's veth ends go with it
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / namespace, ignore_errors=True)
        self._namespaces.clear()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
