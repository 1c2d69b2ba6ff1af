"""The documentation site (mkdocs.yml, docs/site.md): built strictly, complete, and read in
a browser.

The site is built once per session, as `make docs` builds it, into a temporary directory.
The browser test drives Debian's headless ``chromium``; where it is missing the test skips
with a message, and under ``CI=true`` that skip is a failure (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from dynalease_dev.docs_site import REFERENCE, nav_pages
from support.browser import Page, chromium_page, find_chromium, serve_directory

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "dynalease"
#: Where the browser test leaves its screenshots (build/ is ignored by git).
SCREENSHOTS = Path(os.environ.get("DYNALEASE_DOCS_SCREENSHOTS", ROOT / "build" / "docs-browser"))
#: Generous bounds: the machine runs other suites beside this one. A page of the local
#: site loads in well under a second; search builds its index in a worker first.
PAGE_LOAD_S = 30.0
SEARCH_S = 60.0


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict``, as `make docs` runs it (the Material banner silenced)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
    return subprocess.run(
        [*command, "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    started = time.monotonic()
    done = build(ROOT / "mkdocs.yml", target)
    seconds = time.monotonic() - started
    assert done.returncode == 0, f"`make docs` fails:\n{done.stdout}\n{done.stderr}"
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert not warnings, "the build warns:\n" + "\n".join(warnings)
    print(f"site built in {seconds:.1f} s")
    return target


class _ConfigLoader(yaml.SafeLoader):
    """mkdocs.yml as data: its ``!!python/...`` values (the toc's slugify) read as None."""


_ConfigLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)


def the_nav() -> list[str]:
    return nav_pages(yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_ConfigLoader)["nav"])


def public_modules() -> list[str]:
    """dynalease and each module or package of it whose name has no leading underscore
    (``cli`` is the command's, documented as a command in docs/api.md)."""
    names = [path.stem for path in PACKAGE.glob("*.py") if not path.stem.startswith("_")]
    names += [
        path.name
        for path in PACKAGE.iterdir()
        if (path / "__init__.py").is_file() and not path.name.startswith("_")
    ]
    return ["dynalease", *(f"dynalease.{name}" for name in sorted(names) if name != "cli")]


def test_every_public_module_has_an_api_reference_page_in_the_nav() -> None:
    pages = set(the_nav())
    missing = [m for m in public_modules() if f"{REFERENCE}{m}.md" not in pages]
    assert not missing, (
        f"add `- {missing[0]}: {REFERENCE}{missing[0]}.md` under API reference in mkdocs.yml "
        f"(one line; the page is generated from the docstrings) for each of {missing}"
    )


_REST_ROLE = re.compile(r":(?:class|meth|func|attr|exc|data|mod|obj):`")


def test_public_docstrings_are_markdown_without_rest_roles() -> None:
    """The API reference renders docstrings as Markdown (Google style, checked by ruff's D
    rules): a reST role would show as literal text there."""
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for module in public_modules()
        for path in [module_path(module)]
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if _REST_ROLE.search(line)
    ]
    assert not found, f"write `name` (Markdown code) instead of :class:`name` at {found}"


def module_path(module: str) -> Path:
    path = ROOT / "src" / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def test_the_site_has_every_page_the_inventory_and_llms_txt(site: Path) -> None:
    for page in the_nav():
        built = site / ("index.html" if page == "index.md" else page[:-3] + "/index.html")
        assert built.is_file(), f"{page} was not built"
    # The API reference is rendered from docstrings, and listed in the inventory.
    lock_page = (site / "reference" / "dynalease.lock" / "index.html").read_text()
    assert 'id="dynalease.lock.SyncDistributedLock"' in lock_page
    inventory = (site / "objects.inv").read_bytes()
    assert inventory.startswith(b"# Sphinx inventory version 2")
    llms = (site / "llms.txt").read_text()
    assert "## API reference" in llms and "reference/dynalease.lock/" in llms
    full = (site / "llms-full.txt").read_text()
    assert "SyncDistributedLock" in full and "How dynalease locks behave" in full


def test_the_changelog_page_is_the_changelog(site: Path) -> None:
    page = (site / "changelog" / "index.html").read_text()
    assert "Unreleased" in page and "--8&lt;--" not in page


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """A copy of the site with a link to a page that does not exist, and one to a missing
    section of a page that does, does not build: each is named. The copy leaves out the
    generated API pages: rendering them is most of a build and has no links of this kind."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    page = docs / "security.md"
    page.write_text(
        page.read_text()
        + "\nSee [the runbook](no-such-page.md) and [locks](locks.md#no-such-part).\n"
    )
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text()
    text = text.replace("docs_dir: docs\n", f"docs_dir: {docs}\n")
    text = text.replace("  - dev/", f"  - {ROOT}/dev/")  # the hooks, from the checkout
    text = re.sub(rf"(?m)^ +- [\w.]+: {REFERENCE}.*\n", "", text)
    assert REFERENCE not in text.split("\nnav:", 1)[1]
    config.write_text(text)
    done = build(config, tmp_path / "site")
    assert done.returncode != 0, "the strict build accepted a broken link"
    output = done.stdout + done.stderr
    assert "in strict mode" in output, output
    warnings = [line for line in output.splitlines() if line.startswith("WARNING")]
    planted = [line for line in warnings if "no-such-page.md" in line or "#no-such-part" in line]
    assert len(planted) == 2, output
    # Links into the left-out API pages are reported too; nothing else is.
    assert all(line in planted or f"'{REFERENCE}" in line for line in warnings), output


def test_a_browser_follows_the_nav_searches_and_takes_screenshots(
    site: Path, tmp_path: Path
) -> None:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; make system-deps)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with serve_directory(site) as base, chromium_page(binary, tmp_path / "profile") as page:
        page.open(base, timeout=PAGE_LOAD_S)
        assert (
            page.evaluate("document.querySelector('article h1').firstChild.textContent")
            == "dynalease"
        )
        page.screenshot(SCREENSHOTS / "home.png")
        links = page.evaluate(
            "[...document.querySelectorAll('nav.md-nav--primary a.md-nav__link[href]')]"
            ".map(a => a.href)"
        )
        pages = sorted({link.split("#")[0] for link in links if link.startswith(base)})
        assert len(pages) == len(set(the_nav())), pages
        # Every page renders with its navigation and a title. Search's index is not loaded
        # meanwhile: each page would parse it again (half a megabyte) for nothing.
        page.send("Network.enable")
        page.send("Network.setBlockedURLs", urls=["*search_index.json"])
        for url in pages:
            page.open(url, timeout=PAGE_LOAD_S)
            assert page.evaluate(
                "!!document.querySelector('nav.md-nav--primary') && "
                "!!document.querySelector('article h1')"
            ), f"{url} has no navigation or no title"
        page.send("Network.setBlockedURLs", urls=[])
        page.open(base + "reference/dynalease.lock/", timeout=PAGE_LOAD_S)
        page.screenshot(SCREENSHOTS / "api-dynalease.lock.png")
        found = {query: search(page, base, query) for query in ("stuck lock", "fencing")}
    for query, results in found.items():
        print(f"search {query!r}: {results[:3]}")
    stuck = [title for title, _ in found["stuck lock"][:3]]
    assert any("stuck" in title.lower() for title in stuck), stuck
    assert found["fencing"][0][0] == "Fencing tokens", found["fencing"][:3]
    for name in ("home.png", "api-dynalease.lock.png"):
        assert (SCREENSHOTS / name).stat().st_size > 10_000, name


def search(page: Page, base: str, query: str) -> list[tuple[str, str]]:
    """Type ``query`` in the search box of a freshly opened home page; the results' titles
    and addresses, best first."""
    page.open(base, timeout=PAGE_LOAD_S)
    page.evaluate(
        "(() => { const box = document.querySelector('[data-md-component=search-query]');"
        f" box.focus(); box.value = {json.dumps(query)};"
        " box.dispatchEvent(new Event('input', {bubbles: true}));"
        " box.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true})); })()"
    )
    page.wait_for(  # "Initializing search", then "N matching documents"
        "/matching/.test(document.querySelector('.md-search-result__meta').textContent)",
        timeout=SEARCH_S,
    )
    results: list[list[str]] = page.evaluate(
        "[...document.querySelectorAll('.md-search-result__item > a.md-search-result__link')]"
        ".map(a => [(a.querySelector('h1, h2') || a).textContent.trim(), a.href])"
    )
    return [(title, url) for title, url in results]
