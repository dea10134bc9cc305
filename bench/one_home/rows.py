"""Each row of issue 50's table (and the rows that held), alone, on the real command line
(`.venv/bin/simab run`, the demo's defaults unless said, a fresh SIMAB_HOME each): wall
seconds to the exit, the process's CPU seconds (os.wait4), its lines.  python bench/one_home/rows.py [ROW WORDS…] (after mkrows.py)"""

import http.server
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
R = Path(os.environ.get("ONE_HOME", "/tmp/one_home")) / "rows"
SIMAB = str(ROOT / ".venv/bin/simab")
HOLDER = textwrap.dedent("""
    import sys, time
    from ops.storage.home_lock import HomeClaim, home_lock
    with home_lock(sys.argv[1], HomeClaim(holder="", how="`simab run`")) as held:
        held.note(lifecycle="feedc0ffee42")
        print("held", flush=True)
        time.sleep(600)
""")


class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(404)
        self.end_headers()

    def log_message(self, *a):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=server.serve_forever, daemon=True).start()
llm = f"http://127.0.0.1:{server.server_port}/v1"

rows = [
    ("a second run on a held home", {"SIMAB_HOME": R / "h_held"}),
    ("lists file, score nan", {"SIMAB_ARMS": f"pop,ours=lists:{R}/nan.csv"}),
    ("lists file, rank -1", {"SIMAB_ARMS": f"pop,ours=lists:{R}/minus.csv"}),
    ("a log whose timestamps are all one", {"SIMAB_SOURCE": "files", "SIMAB_FILES_PATH": R / "same"}),
    ("a log of 3 users", {"SIMAB_SOURCE": "files", "SIMAB_FILES_PATH": R / "three"}),
    ("name=pop;foo=1", {"SIMAB_ARMS": "random,p=pop;foo=1"}),
    ("held: a missing lists file", {"SIMAB_ARMS": f"pop,ours=lists:{R}/nope.csv"}),
    ("held: files without a path", {"SIMAB_SOURCE": "files"}),
    ("held: a bad URL", {"SIMAB_LLM_BASE_URL": "ftp//nowhere"}),
    ("held: an MLflow model not there", {"SIMAB_ARMS": "pop,m=mlflow:models:/nope/1"}),
    ("held: negative agents", {"SIMAB_AGENTS": "-1"}),
    ("held: negative evaluation users", {"SIMAB_EVAL_USERS": "-2"}),
    ("held: a control that is not an arm", {"SIMAB_ARMS": "random,pop", "SIMAB_CONTROL": "fm"}),
    ("held: bad arm parameters", {"SIMAB_ARMS": "pop,d=deepfm;train_fraction=1.5"}),
    ("held: a bad cost cap", {"SIMAB_MAX_COST_USD": "-1"}),
    ("held: the default cap (LLM brain)", {"SIMAB_BRAIN": "llm", "SIMAB_LLM_BASE_URL": llm}),
    ("held: a duplicate pair", {"SIMAB_SOURCE": "files", "SIMAB_FILES_PATH": R / "dup"}),
    ("held: an item missing from the items file", {"SIMAB_SOURCE": "files", "SIMAB_FILES_PATH": R / "missing_item"}),
    (
        "held: a UTF-8 BOM is read (log with one timestamp)",
        {"SIMAB_SOURCE": "files", "SIMAB_FILES_PATH": R / "bom_same"},
    ),
    ("held: a ;-separated file", {"SIMAB_SOURCE": "files", "SIMAB_FILES_PATH": R / "semicolon"}),
]
only = sys.argv[1:]
holder = None
print(f"load {os.getloadavg()}", flush=True)
for k, (name, extra) in enumerate(rows):
    if only and not any(o in name for o in only):
        continue
    home = extra.get("SIMAB_HOME", R / f"home{k}")
    subprocess.run(["rm", "-rf", str(home)])
    env = {
        k2: v
        for k2, v in os.environ.items()
        if not k2.startswith("SIMAB_") and k2 not in ("DAGSTER_HOME", "MLFLOW_TRACKING_URI")
    }
    env.update({"PYTHONPATH": str(ROOT), "SIMAB_HOME": str(home), **{a: str(b) for a, b in extra.items()}})
    if "held home" in name:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(home)], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        assert holder.stdout.readline().strip() == "held"
    t = time.monotonic()
    p = subprocess.Popen([SIMAB, "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    killer = threading.Timer(150, p.kill)  # a row that went on into the work: stopped
    killer.start()
    first_at = None
    lines = []
    for line in p.stdout:
        if line.strip():
            if first_at is None:
                first_at = time.monotonic() - t
            lines.append(line.rstrip())
    _, status, usage = os.wait4(p.pid, 0)
    killer.cancel()
    wall = time.monotonic() - t
    if holder is not None:
        holder.kill()
        holder.wait()
        holder = None
    cpu = usage.ru_utime + usage.ru_stime
    print(
        f"### {name}: exit {os.waitstatus_to_exitcode(status)}, first line at {first_at or 0:.1f} s, "
        f"{wall:.1f} s wall, {cpu:.1f} s CPU, {len(lines)} line(s), load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    for line in lines[:3] + ["    …"] + lines[-1:] if len(lines) > 4 else lines:
        print("    " + line[:600], flush=True)
    subprocess.run(["rm", "-rf", str(home)])
