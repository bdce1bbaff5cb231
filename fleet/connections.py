"""Redis connections: one pool per URL and process."""
from __future__ import annotations

import redis

_clients: dict[tuple[str, bool], redis.Redis] = {}


def client(url: str, raw: bool = False) -> redis.Redis:
    """Raw clients return bytes, the others text."""
    if (url, raw) not in _clients:
        # a reduction in Redis (ZUNIONSTORE of a million values) may take seconds: the unix
        # socket default of 5 s would cut it off
        _clients[url, raw] = redis.Redis.from_url(url, decode_responses=not raw,
                                                  socket_timeout=600)
    return _clients[url, raw]
