"""Redis connections: one pool per URL and process.

A Redis that requires a password (AUTH) gets it from `use_password`, which the entry points
call with $REDIS_PASSWORD, a secret or the password a given URL carried (Settings takes it out
of the URL): URLs travel in step events and stay free of it. TLS is the URL's scheme: rediss://.
"""
from __future__ import annotations

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

_clients: dict[tuple[str, bool], redis.Redis] = {}
_password: str | None = None


def use_password(password: str | None) -> None:
    """Every connection this process opens from now on AUTHs with `password` (None: none)."""
    global _password
    if password != _password:
        _password = password or None
        _clients.clear()


def client(url: str, raw: bool = False) -> redis.Redis:
    """Raw clients return bytes, the others text."""
    if (url, raw) not in _clients:
        # a reduction in Redis (ZUNIONSTORE of a million values) may take seconds: the unix
        # socket default of 5 s would cut it off
        # a restart of Redis (a second or two) is waited out: ~10 s of retries, then the
        # connection error
        _clients[url, raw] = redis.Redis.from_url(
            url, decode_responses=not raw, socket_timeout=600,
            retry=Retry(ExponentialBackoff(cap=2.0, base=0.1), 8),
            retry_on_error=[redis.exceptions.ConnectionError],
            **({"password": _password} if _password else {}))
    return _clients[url, raw]
