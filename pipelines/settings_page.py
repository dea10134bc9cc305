"""docs/settings.md, generated from the settings' declarations (`ops.settings`) and the op
config fields each fills (`pipelines.setting_ops`): the precedence, the table of every
setting and the values refused together.

    python -m pipelines.settings_page > docs/settings.md     # tests/test_run_config.py checks it is current
    python -m pipelines.settings_page --table                # the table alone (`simab settings --markdown`)
"""

from __future__ import annotations

import sys

from ops.settings import PRECEDENCE, PRECEDENCE_NOTES, _extra, allowed, declared
from pipelines.setting_ops import SETTING_OPS


def markdown_table() -> str:
    """The settings table of docs/settings.md, generated from the declarations (`ops.settings`,
    `pipelines.setting_ops`)."""
    rows = ["| variable | allowed | default | what it sets |", "| --- | --- | --- | --- |"]
    for name, info in declared().items():
        extra = _extra(info)
        default = info.default if info.default is not None else extra.get("config_default")
        if isinstance(default, bool):
            default = str(default).lower()
        elif isinstance(default, list):
            default = extra["sep"].join(str(v) for v in default)
        shown = (
            "–"
            if default is None
            else (
                "`data/` in the project"
                if name == "home"
                else "`../shared/data`"
                if name == "shared_data"
                else f"`{default}`"
                if default != ""
                else "empty"
            )
        )
        feeds = ", ".join(f"`{t}`" for t in SETTING_OPS.get(name, ())) or (
            f"resource `{extra['resource']}`" if extra["resource"] else ""
        )
        what = (info.description + (f" → {feeds}" if feeds else "")).replace("|", "\\|")  # a pipe would end the cell
        rows.append(f"| `{extra['env']}` | {allowed(name)} | {shown} | {what} |")
    return "\n".join(rows)


# Values each allowed on its own that cannot work together: refused before the first step,
# in seconds, with one line and nothing stored (`ops/preflight/checks.py` checks each).
REFUSED_TOGETHER: tuple[tuple[str, str], ...] = (
    (
        "`SIMAB_CONTROL` not among the arms, or a diagnostic arm (`mirror`)",
        "the read-out compares every arm with the control; unset, it is Pop where Pop is an arm",
    ),
    (
        "an arm spec's parameter its kind does not take, or a value it refuses",
        "the arm is made from its spec, unfitted, before the first step ([arms.md](arms.md))",
    ),
    (
        "`SIMAB_SHARDS` above the agents per arm (`SIMAB_AGENTS`, else the users where the source says how many)",
        "a shard would simulate no one",
    ),
    (
        "`SIMAB_VISITS` not three whole numbers ≥ 1, or set without `SIMAB_ACTIVITY_DRIVES=visits`",
        "one number per activity tier; the session-length design does not read it",
    ),
    ("`SIMAB_PERSONA=matched` with a brain that does not read personas", "the embedded brain decides from the traits"),
    ("`SIMAB_PRIMARY_METRIC` not a metric of the read-out", "the verdict would name no winner"),
    (
        "`SIMAB_METADATA_SOURCE=synthetic` on MovieLens (`local`, `download`); `local` with neither "
        "`SIMAB_METADATA_PATH` nor `SIMAB_POSTER_DIRS`; `tmdb` without `$TMDB_READ_TOKEN` or `$TMDB_API_KEY`",
        "nothing to read the metadata from",
    ),
)


def markdown_page() -> str:
    """docs/settings.md: the precedence (`PRECEDENCE`), the table of every setting and what is
    refused together (`REFUSED_TOGETHER`)."""
    levels = "\n".join(f"{i}. {level}" for i, level in enumerate(PRECEDENCE, start=1))
    together = "\n".join(["| refused | because |", "| --- | --- |", *(f"| {a} | {b} |" for a, b in REFUSED_TOGETHER)])
    return (
        "# Settings\n\nGenerated from `ops/settings.py` and `pipelines/setting_ops.py` (`python -m pipelines.settings_page > docs/settings.md`).\n\n"
        f"## Precedence\n\nWhere a step's value comes from, highest first:\n\n{levels}\n\n{PRECEDENCE_NOTES}\n\n"
        f"## Every setting\n\n{markdown_table()}\n\n"
        "## Values that cannot work together\n\nA bad value stops a run before any work with one line naming the "
        "variable, the value and what is allowed.  So do values that are each allowed but cannot work together, in "
        f"seconds and before anything is stored:\n\n{together}\n"
    )


if __name__ == "__main__":
    print(markdown_table() if sys.argv[1:] == ["--table"] else markdown_page(), end="\n" if sys.argv[1:] else "")
