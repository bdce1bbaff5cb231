"""Headless Chromium, Debian's (`make chromium` installs it), for the report's tests and
benchmark: a page's DOM once its scripts ran, a screenshot. The browser resolves no host, so
a page that fetched anything would show it broken."""
from __future__ import annotations

import os
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--mute-audio", "--host-resolver-rules=MAP * ~NOTFOUND"]


def missing() -> str | None:
    """Why Chromium cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing: `make chromium` installs Debian's package"
    return None


def _run(page: Path, *args: str, fragment: str = "", timeout: float = 120) -> str:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args,
                               page.resolve().as_uri() + (f"#{fragment}" if fragment else "")],
                              capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def dom(page: Path, fragment: str = "") -> str:
    """The page's DOM as HTML, after its load event (opened at #`fragment`, if given)."""
    return _run(page, "--dump-dom", fragment=fragment)


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 1800) -> None:
    _run(page, f"--screenshot={png.resolve()}", f"--window-size={width},{height}")


class Elements(HTMLParser):
    """Every element's tag, attributes and own text, in document order, with the
    data-column of the element it is in (None outside a column's card and row)."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.found: list[dict] = []
        self._open: list[dict] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        column = attrs.get("data-column", self._open[-1]["column"] if self._open else None)
        element = {"tag": tag, "attrs": attrs, "text": "", "column": column}
        self.found.append(element)
        if tag not in ("meta", "input", "br", "path", "link", "img"):
            self._open.append(element)

    def handle_endtag(self, tag):
        if tag not in [e["tag"] for e in self._open]:      # a void element (<path/>)
            return
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for element in self._open:          # an element's text holds its children's
            element["text"] += data
