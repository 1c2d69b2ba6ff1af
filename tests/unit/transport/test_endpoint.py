"""What both lean drivers share: the address list, the address walk, idle connections."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from dynalease._transport.http import endpoint as endpoint_module
from dynalease._transport.http.endpoint import ConnectWalk, Endpoint, IdleConnections
from dynalease._transport.http.sockets import open_socket, wait_writable


def _endpoint(host: str = "db.test", port: int = 8000) -> Endpoint[Any]:
    return Endpoint(host, port, connect_timeout=1.0, read_timeout=1.0, max_connections=2)


def _info(family: int, address: tuple[Any, ...]) -> tuple[Any, ...]:
    return (family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", address)


V6 = (socket.AF_INET6, ("::1", 8000, 0, 0))
V4 = (socket.AF_INET, ("127.0.0.1", 8000))


def test_looked_up_addresses_are_kept_in_order_without_repeats() -> None:
    endpoint = _endpoint()
    assert endpoint.known() is None  # nothing looked up yet
    learned = endpoint.learn([_info(*V6), _info(*V4), _info(*V6)], time.monotonic())
    assert learned == [V6, V4]
    assert endpoint.known() == [V6, V4]


def test_the_address_that_answered_goes_first_until_a_connect_is_refused() -> None:
    endpoint = _endpoint()
    addresses = endpoint.learn([_info(*V6), _info(*V4)], time.monotonic())
    endpoint.answered(addresses, 1)
    assert endpoint.known() == [V4, V6]
    failure = endpoint.connect_failed(ConnectionRefusedError())
    assert not failure.timeout
    assert endpoint.known() is None  # refused: look up again


def test_a_connect_timeout_keeps_the_addresses_and_is_never_sent() -> None:
    endpoint = _endpoint()
    endpoint.learn([_info(*V4)], time.monotonic())
    failure = endpoint.connect_failed(TimeoutError())
    assert failure.timeout
    assert endpoint.known() == [V4]


def test_looked_up_addresses_expire() -> None:
    endpoint = _endpoint()
    endpoint.learn([_info(*V4)], time.monotonic() - endpoint_module.RESOLVE_TTL_S - 1)
    assert endpoint.known() is None


def test_an_ip_address_needs_no_lookup() -> None:
    assert _endpoint("127.0.0.1").known() == [V4]
    assert _endpoint("::1").known() == [V6]


def test_a_connect_limit_is_the_connect_timeout_or_the_callers_deadline() -> None:
    endpoint = _endpoint()
    assert endpoint.connect_limit(10.0, None) == 11.0
    assert endpoint.connect_limit(10.0, 10.5) == 10.5


class _Fake:
    def __init__(self, *, quiet: bool = True, reusable: bool = True) -> None:
        self._quiet = quiet
        self._reusable = reusable
        self.closed = False

    def quiet(self) -> bool:
        return self._quiet

    def reusable(self) -> bool:
        return self._reusable

    def close(self) -> None:
        self.closed = True


def test_idle_connections_are_reused_most_recent_first_up_to_their_limit() -> None:
    idle: IdleConnections[_Fake] = IdleConnections(2)
    first, second, third = _Fake(), _Fake(), _Fake()
    for connection in (first, second, third):
        idle.give_back(connection)
    assert third.closed and len(idle) == 2
    assert idle.take() is second
    assert idle.take() is first
    assert idle.take() is None


def test_a_connection_that_may_not_be_reused_is_closed_not_kept() -> None:
    idle: IdleConnections[_Fake] = IdleConnections(2)
    done = _Fake(reusable=False)
    idle.give_back(done)
    assert done.closed and len(idle) == 0


def test_an_idle_connection_that_spoke_or_idled_too_long_is_closed_on_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idle: IdleConnections[_Fake] = IdleConnections(4)
    noisy, old = _Fake(quiet=False), _Fake()
    idle.give_back(old)
    idle.give_back(noisy)
    assert idle.take() is old
    assert noisy.closed
    idle.give_back(old)
    later = time.monotonic() + endpoint_module.IDLE_REUSE_S + 1
    monkeypatch.setattr("dynalease._transport.http.endpoint.time.monotonic", lambda: later)
    assert idle.take() is None
    assert old.closed


def test_the_walk_tries_each_address_and_remembers_the_one_that_answered() -> None:
    with socket.socket(socket.AF_INET6) as refusing, socket.socket() as listener:
        refusing.bind(("::1", 0))  # bound, never listening: connections are refused
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        refused = (socket.AF_INET6, refusing.getsockname())
        served = (socket.AF_INET, listener.getsockname())
        endpoint = _endpoint()
        endpoint._addresses, endpoint._resolved_at = [refused, served], time.monotonic()
        addresses = endpoint.known()
        assert addresses == [refused, served]
        with ConnectWalk(endpoint, addresses) as walk:
            while (sock := walk.pending()) is not None:
                walk.settle(wait_writable(sock, 1.0))
        with walk.result() as connected:
            assert connected.getpeername() == served[1]
        assert endpoint.known() == [served, refused]


def test_a_walk_with_no_address_accepting_raises_the_last_failure() -> None:
    with socket.socket() as closed_port:
        closed_port.bind(("127.0.0.1", 0))
        address = (socket.AF_INET, closed_port.getsockname())
        with ConnectWalk(_endpoint(), [address]) as walk:
            while (sock := walk.pending()) is not None:
                walk.settle(wait_writable(sock, 1.0))
        with pytest.raises(ConnectionRefusedError):
            walk.result()


def test_a_walk_out_of_time_raises_a_timeout_and_closes_its_socket() -> None:
    walk = ConnectWalk(_endpoint(), [V4])
    sock = open_socket(socket.AF_INET)
    walk._waiting = sock  # as if a connect were under way
    with pytest.raises(TimeoutError):
        walk.settle(False)
    assert sock.fileno() == -1


def test_every_socket_has_no_delay_and_keep_alive() -> None:
    with open_socket(socket.AF_INET) as sock:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
        assert not sock.getblocking()
