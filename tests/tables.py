"""Markdown tables as tests read them: tabulate pads each cell to its column's width, so a
test matches cells on the table with the padding taken out (`unpadded`)."""

from __future__ import annotations


def unpadded(text: str) -> str:
    """`text` with every table row written `| a | b |`: each cell stripped, one space each side
    (the rule under the header, `|---|:--|`, is left as it is)."""
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        rule = set(stripped) <= set("|-: ")
        if stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1 and not rule:
            cells = [cell.strip() for cell in stripped[1:-1].split("|")]
            line = "| " + " | ".join(cells) + " |"
        out.append(line)
    return "\n".join(out)
