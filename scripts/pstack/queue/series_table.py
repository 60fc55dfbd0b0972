"""The table of the series in README.md, generated from patches/: number
(linked to the patch file), subject, the first sentence of the patch's
message and its Upstream-Status.

`make export` rewrites it between its markers, so it cannot drift from the
patches; `make check-series` fails while the committed table is stale.
"""

from __future__ import annotations

from ..core import markers
from ..core.layout import Layout
from ..core.series import read_patches

COMMAND = "make export"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def series_table(layout: Layout) -> str:
    where = layout.patches.relative_to(layout.root).as_posix()
    rows = [
        "| # | patch | why (first sentence of its message) | "
        "Upstream-Status |",
        "|---|---|---|---|",
    ]
    for number, (name, patch) in enumerate(read_patches(layout), 1):
        rows.append(f"| [{number}]({where}/{name}) | {_cell(patch.subject)} "
                    f"| {_cell(patch.summary)} | {patch.upstream_status} |")
    return "\n".join(rows)


def update_series_table(layout: Layout) -> bool:
    """Rewrite the table in README.md if it has one; True if it changed.
    README's table is the default line's: other lines leave it alone."""
    readme = layout.readme
    if not readme.exists() or not layout.is_default_line:
        return False
    text = readme.read_text()
    if markers.section(text, COMMAND) is None:
        return False
    new = markers.replace_section(text, COMMAND, series_table(layout))
    if new == text:
        return False
    readme.write_text(new)
    return True
