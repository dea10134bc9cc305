"""`python -m ops.simulation.kinds`: every brain of the registry, built-in or brought, with
what it answers and whether it decides offline."""

from __future__ import annotations

from ops.simulation.kinds import brain_kind, brain_names


def main() -> None:
    for name in brain_names():
        kind = brain_kind(name)
        offline = "offline" if kind.decides_offline else "pays per decision"
        answers = ", ".join(sorted(kind.answers)) or "no trust protocol"
        print(f"{name}: {kind.summary} [{offline}; answers {answers}]")


if __name__ == "__main__":
    main()
