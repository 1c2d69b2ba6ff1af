"""The docs test's own moto server handle: reset to empty before each document."""

from __future__ import annotations

import urllib.request


class DocsServer:
    def __init__(self, url: str) -> None:
        self.url = url

    def reset(self) -> None:
        """Forget every table (moto's reset endpoint)."""
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST", data=b"")
        urllib.request.urlopen(request, timeout=10).close()
