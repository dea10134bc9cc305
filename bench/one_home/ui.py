"""What the scripts that drive `simab ui` share: waiting until its code location has loaded."""

import time

import requests

LOADED = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"


def wait_loaded(port: int) -> None:
    """Until the webserver on `port` answers and every code location is LOADED."""
    while True:
        try:
            r = requests.post(f"http://127.0.0.1:{port}/graphql", json={"query": LOADED}, timeout=10)
            entries = r.json()["data"]["workspaceOrError"]["locationEntries"]
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                return
        except Exception:  # not up yet
            pass
        time.sleep(2)
