"""Whether botocore would send to an endpoint through a proxy, read from the environment.

botocore takes its proxies from ``urllib.request.getproxies()`` (on Linux,
``getproxies_environment()``: any ``<scheme>_proxy`` variable in any letter
case, the all-lowercase one winning) unless ``NO_PROXY`` covers the host
(``proxy_bypass_environment``), and then uses the one named by the endpoint's
scheme. The lean path must not connect directly where botocore would go through a
proxy, so it asks the same question here. ``urllib.request`` itself costs a fresh
process tens of milliseconds to import (``http.client``, ``email``), so its two
functions are restated; ``tests/unit/transport/test_lean_settings.py`` compares
them with the standard library's on many environments.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["environment_proxies", "proxy_for"]

_PORT = re.compile(r"(.*):([0-9]*)", re.DOTALL)


def environment_proxies(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``urllib.request.getproxies_environment()``: scheme (and ``no``) to value."""
    environ = os.environ if environ is None else environ
    proxies: dict[str, str] = {}
    # Two passes, as the standard library: any case first, then all-lowercase wins.
    for name, value in environ.items():
        lowered = name.lower()
        if value and lowered[-6:] == "_proxy":
            proxies[lowered[:-6]] = value
    if "REQUEST_METHOD" in environ:  # CVE-2016-1000110: a CGI request's Proxy: header
        proxies.pop("http", None)
    for name, value in environ.items():
        if name[-6:] == "_proxy":
            lowered = name.lower()
            if value:
                proxies[lowered[:-6]] = value
            else:
                proxies.pop(lowered[:-6], None)
    return proxies


def _bypassed(host: str, proxies: Mapping[str, str]) -> bool:
    """``urllib.request.proxy_bypass_environment(host, proxies)``."""
    no_proxy = proxies.get("no")
    if no_proxy is None:
        return False
    if no_proxy == "*":
        return True
    host = host.lower()
    split = _PORT.fullmatch(host)
    hostonly = split.group(1) if split else host
    for name in no_proxy.split(","):
        name = name.strip()
        if name:
            name = name.lstrip(".").lower()
            if hostonly == name or host == name:
                return True
            name = "." + name
            if hostonly.endswith(name) or host.endswith(name):
                return True
    return False


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy botocore would send requests to ``url`` through, else None.

    As ``botocore.utils.get_environ_proxies`` and ``ProxyConfiguration.proxy_url_for``:
    no proxy when ``NO_PROXY`` covers the URL's host (its ``netloc``), else the
    proxy named for the URL's scheme.
    """
    proxies = environment_proxies(environ)
    parts = urlsplit(url)
    if not proxies or _bypassed(parts.netloc, proxies):
        return None
    return proxies.get(parts.scheme) or None
