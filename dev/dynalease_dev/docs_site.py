"""The documentation site's MkDocs hooks (``hooks:`` in mkdocs.yml): the nav is the one list.

- An API reference page, ``reference/<module>.md`` in the nav, is generated when no file
  is there: its title and a ``::: <module>`` directive, which mkdocstrings renders from the
  module's docstrings. A new public module needs one nav line.
- llms.txt's sections are the nav's: each top-level entry is a section of its pages (a
  page alone is a section of one). A new page needs one nav line.
"""

from __future__ import annotations

from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

REFERENCE = "reference/"


def nav_pages(entry: Any) -> list[str]:
    """The page paths of one nav entry (a path, a ``{title: entry}`` or a list), in order."""
    if isinstance(entry, str):
        return [entry] if entry.endswith(".md") else []
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in nav_pages(value)]
    if isinstance(entry, list):
        return [page for item in entry for page in nav_pages(item)]
    return []


def nav_sections(nav: list[Any]) -> dict[str, list[str]]:
    """Each top-level nav entry's title and its pages."""
    sections: dict[str, list[str]] = {}
    for entry in nav:
        if isinstance(entry, dict):
            for title, value in entry.items():
                sections[str(title)] = nav_pages(value)
    return sections


def reference_page(path: str) -> str:
    """The Markdown of a generated API reference page: ``reference/dynalease.lock.md``."""
    module = path.removeprefix(REFERENCE).removesuffix(".md")
    return f"# `{module}`\n\n::: {module}\n"


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Give llms.txt the nav's sections (its plugin reads them when the files are listed)."""
    llmstxt = config.plugins.get("llmstxt")
    if llmstxt is not None:
        llmstxt.config["sections"] = nav_sections(config.nav or [])
    return config


@event_priority(100)  # before llms.txt and mkdocstrings see the list of files
def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add a generated page for each ``reference/<module>.md`` of the nav without a file."""
    for path in nav_pages(config.nav or []):
        if path.startswith(REFERENCE) and files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, content=reference_page(path)))
    return files
