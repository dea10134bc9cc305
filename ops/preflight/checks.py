"""Every value the settings name, checked before the first step: the brain (a name of the
brain registry), the arms' parameters, lists files and MLflow models, the data source's
folders and files, the folders and files of the metadata, the LLM endpoint (a well-formed
URL, the key where one is needed and, with the LLM brain, one request that shows a server
answers); and the values that are each allowed but cannot work together: a control that is
not an arm, synthetic metadata on a source with none, more user shards than agents, visits
per tier the design does not read, matched personas for a brain that ignores them, a
primary metric the read-out does not compute.  `check_values` raises `SettingError`
on the first fault, one line naming the variable, its value and what is wrong, so the runner
stops before any work instead of after the steps that come before the one the value breaks.

What only the data can say (a user or item a lists file names that the data lacks, a bad
row in the middle of a file) is still found by the step that reads it; here files are
checked as far as their header — all but a files source's random-exposure file, the judge of
the verdict, which is checked row by row (against the id columns of the items, the
interactions and the users), so that a bad row of it stops the runner in seconds instead of
the ingestion step.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ops.arms.registry import arm_class, spec_of, spec_problem
from ops.data.domain import DataFileError, LogShape, check_files_folder, log_shape
from ops.data.movielens import MovieLensFormatError, find_tables
from ops.data.random_exposure import check_random_exposure
from ops.data.tmdb import API_KEY_ENV as TMDB_API_KEY_ENV
from ops.data.tmdb import READ_TOKEN_ENV as TMDB_READ_TOKEN_ENV
from ops.preflight.bill import brain_of, known_users
from ops.readout.agent_metrics import METRICS
from ops.settings import SettingError, Settings
from ops.simulation.brains.llm.endpoint import key_required, resolve_endpoint
from ops.simulation.fatigue import ACTIVITY_TIERS
from ops.storage.exhaustion import free_mb, lifecycle_need_mb
from ops.web import redact

# One request to see that the endpoint answers: its list of models, which OpenAI, vLLM,
# llama.cpp and Ollama serve without cost; any HTTP answer (even 404) shows a server is there.
PROBE_PATH = "/models"
# The sources whose items come with no side information of their own (MovieLens's three tables).
SOURCES_WITHOUT_SIDE_INFO = ("local", "download")
PROBE_TIMEOUT_S = 3.0


def check_values(
    settings: Settings,
    environ: Mapping[str, str] | None = None,
    uses_llm: bool = False,
    tracking_uri: Callable[[], str] | None = None,
) -> None:
    """Every check of this module, in the order the lifecycle uses the values; `uses_llm`:
    the LLM brain decides (then the endpoint is probed and its key required);
    `tracking_uri()`: the MLflow store the arms' model URIs resolve against."""
    env = os.environ if environ is None else environ
    brain_of(settings)  # a brain of the registry, or SettingError naming the known ones
    check_arms(settings, tracking_uri)
    check_control(settings)
    check_source(settings)
    check_metadata(settings, env)
    check_paths(settings)
    check_simulation(settings)
    check_report(settings)
    check_llm_endpoint(settings, env, probe=uses_llm)


def check_arms(settings: Settings, tracking_uri: Callable[[], str] | None = None) -> None:
    """Each arm's parameters, as its kind takes them (`ops.arms.registry.spec_problem`: the
    arm made, not fitted), and its source, as its kind checks it (`ArmBase.source_problem`:
    a lists file's header, an MLflow model's URI)."""
    written = ",".join(spec_of(name).text() for name in settings.arms or ())
    for name in settings.arms or ():
        spec = spec_of(name)
        kind = arm_class(name)
        problem = spec_problem(spec)
        if not problem and spec.source and kind is not None:
            problem = kind.source_problem(spec.source, tracking_uri)
        if problem:
            raise SettingError(f"SIMAB_ARMS={written!r}: arm {name}: {problem}")


def check_control(settings: Settings) -> None:
    """The control the settings name is one of the arms, and one that can be compared
    against (not a diagnostic arm such as the mirror).  Unset, the read-out takes Pop where
    it is an arm, else a candidate of the arms (`ops.arms.registry.control_arm`)."""
    control, arms = settings.control, list(settings.arms or ())
    if control is None:
        return
    if control not in arms:
        raise SettingError(
            f"SIMAB_CONTROL={control!r}: not one of the arms ({', '.join(arms)}); name one of them, "
            "or add it to SIMAB_ARMS"
        )
    if not getattr(arm_class(control), "control_candidate", True):
        candidates = [a for a in arms if getattr(arm_class(a), "control_candidate", True)]
        raise SettingError(
            f"SIMAB_CONTROL={control!r}: arm {control} measures the simulator and is no candidate to compare "
            f"against; name another arm ({', '.join(candidates) or 'none of these can be'})"
        )


def check_source(settings: Settings) -> None:
    """The data source's folder and files, as far as their headers (a random-exposure file
    whole: `ops.data.random_exposure.check_random_exposure`)."""
    source = settings.source or "synthetic"
    if source == "files":
        if not settings.files_path:
            raise SettingError(
                "SIMAB_SOURCE='files': needs SIMAB_FILES_PATH, the folder of interactions and items (docs/data_model.md)"
            )
        try:
            check_files_folder(settings.files_path)
            check_random_exposure(settings.files_path)
            shape = log_shape(settings.files_path)
        except DataFileError as exc:
            raise SettingError(f"SIMAB_FILES_PATH={settings.files_path!r}: {exc}") from None
        problem = log_problem(shape, brain_of(settings).min_fit_users) or memory_problem(shape.rows)
        if problem:
            raise SettingError(f"SIMAB_FILES_PATH={settings.files_path!r}: {problem}")
    elif source == "local":
        if not settings.local_path:
            raise SettingError(
                "SIMAB_SOURCE='local': needs SIMAB_LOCAL_PATH, a folder of ML-1M *.dat or ML-100K u.* files"
            )
        try:
            find_tables(settings.local_path)
        except MovieLensFormatError as exc:
            raise SettingError(f"SIMAB_LOCAL_PATH={settings.local_path!r}: {exc}") from None
    elif source == "steam":
        folder = Path(settings.steam_path or settings.shared_data / "steam-australian").expanduser()
        variable = "SIMAB_STEAM_PATH" if settings.steam_path else "SIMAB_SHARED_DATA"
        shown = settings.steam_path or str(settings.shared_data)
        for name in ("interactions.csv", "items.jsonl"):
            if not (folder / name).is_file():
                raise SettingError(f"{variable}={shown!r}: no {name} in {folder} (the steam source reads it)")


def log_problem(shape: LogShape, min_fit_users: int) -> str | None:
    """Why a log cannot feed the lifecycle, from the log alone (`ops.data.domain.log_shape`):
    timestamps that are all one (no split by time can be made of them), or fewer users in
    both the train and the validation window than the brain is fitted on; None when it can."""
    path = shape.path
    if shape.rows > 1 and shape.timestamps == 1:
        return (
            f"{path}: field 'timestamp': every one of its {shape.rows} interactions has the same timestamp "
            f"({shape.first_timestamp}), so the chronological 7:2:1 split (train the first 70 % by time, validation "
            "the next 20 %, test the last 10 %) cannot be made; the log needs the time each interaction happened "
            "(unix seconds or an ISO date-time), as the system recorded it — an export that lost it must be redone"
        )
    if shape.train_and_valid_users < min_fit_users:
        return (
            f"{path}: {shape.users} user(s) in {shape.rows} interactions, of whom {shape.train_and_valid_users} "
            f"have interactions both in the train window (the first 70 % by time) and in the validation window (the "
            f"next 20 %); the lifecycle needs at least {min_fit_users}: the brain is fitted on such users (their train "
            "interactions are the agents' memories, their validation ones what it learns to predict). A log of more "
            "users, each with interactions spread over time, gives them"
        )
    return None


# The lifecycle's peak resident memory against its interactions, all processes together
# (docs/findings/scale.md, `python -m bench.scale`: 2,551 MB at 1 M interactions, 3,732 MB at
# 5 M): the line through the two, rounded up.
PEAK_BASE_MB = 2_300.0
PEAK_MB_PER_MILLION_ROWS = 300.0


def peak_memory_mb(rows: int) -> float:
    """About the lifecycle's peak memory on a log of `rows` interactions, in MB."""
    return PEAK_BASE_MB + PEAK_MB_PER_MILLION_ROWS * rows / 1e6


def machine_memory_mb() -> float | None:
    """What this machine gives the process, in MB: its memory, or the cgroup's limit where
    lower; None where neither can be read."""
    import psutil

    found = [psutil.virtual_memory().total / 2**20]
    try:  # psutil reads the machine's memory, not a container's limit
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            found.append(int(limit) / 2**20)
    except OSError:
        pass
    return min(found) if found else None


def memory_problem(rows: int, machine_mb: float | None = None) -> str | None:
    """Why a lifecycle on `rows` interactions would run out of memory here (its estimated peak
    above what the machine has), or None."""
    machine_mb = machine_memory_mb() if machine_mb is None else machine_mb
    need = peak_memory_mb(rows)
    if machine_mb is None or need <= machine_mb:
        return None
    return (
        f"a lifecycle on its {rows:,} interactions peaks at about {need:,.0f} MB of memory (measured at 1 M and "
        f"5 M interactions: docs/findings/scale.md), more than the {machine_mb:,.0f} MB this machine has; run it "
        "on a machine with more memory, or on a sample of the log's users"
    )


def check_metadata(settings: Settings, environ: Mapping[str, str]) -> None:
    """The metadata source against the data source and what it needs named: synthetic
    metadata comes from a source's own side information (synthetic, files, steam; MovieLens
    has none), local metadata from a file or poster folders, TMDB's with a credential."""
    source, wanted = settings.source or "synthetic", settings.metadata_source
    shown = f"SIMAB_METADATA_SOURCE={wanted!r}"
    if wanted == "synthetic" and source in SOURCES_WITHOUT_SIDE_INFO:
        raise SettingError(
            f"{shown}: source {source} has no side information to take it from (synthetic, files and steam have); "
            "use local (SIMAB_METADATA_PATH, SIMAB_POSTER_DIRS), tmdb or none"
        )
    if wanted == "local" and not settings.metadata_path and not settings.poster_dirs:
        raise SettingError(f"{shown}: needs SIMAB_METADATA_PATH (a metadata file) and/or SIMAB_POSTER_DIRS (posters)")
    if wanted == "tmdb" and not any(environ.get(v) for v in (TMDB_READ_TOKEN_ENV, TMDB_API_KEY_ENV)):
        raise SettingError(
            f"{shown}: neither ${TMDB_READ_TOKEN_ENV} nor ${TMDB_API_KEY_ENV} is set; the crawl needs one (docs/data_sources.md)"
        )


def check_paths(settings: Settings) -> None:
    """The metadata files and poster folders named, and the data folder's place."""
    for variable, value in (("SIMAB_METADATA_PATH", settings.metadata_path), ("SIMAB_LINKS_PATH", settings.links_path)):
        if value and not Path(value).expanduser().is_file():
            raise SettingError(f"{variable}={value!r}: no such file")
    for folder in settings.poster_dirs or ():
        if not Path(folder).expanduser().is_dir():
            raise SettingError(
                f"SIMAB_POSTER_DIRS={os.pathsep.join(settings.poster_dirs or [])!r}: {folder} is not a folder"
            )
    home = Path(settings.home).expanduser()
    existing = next((p for p in (home, *home.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        raise SettingError(f"SIMAB_HOME={str(settings.home)!r}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SettingError(f"SIMAB_HOME={str(settings.home)!r}: {existing} is not writable")
    problem = disk_problem(settings, existing)
    if problem:
        raise SettingError(f"SIMAB_HOME={str(settings.home)!r}: {problem}")


def disk_problem(settings: Settings, existing: Path, free: float | None = None) -> str | None:
    """Why a fresh home (no assets yet: a home used before reuses what it stored) cannot take
    a whole lifecycle: less free space on its disk than the lifecycle writes; None when it can."""
    home = Path(settings.home).expanduser()
    if (home / "assets").exists():
        return None
    free = free_mb(existing) if free is None else free
    need = lifecycle_need_mb(len(settings.arms or ()) or 4, settings.agents, settings.shards, known_users(settings))
    if free is None or free >= need:
        return None
    return (
        f"the disk of {existing} has {free:,.1f} MB free; a lifecycle of {len(settings.arms or ()) or 4} arms writes "
        f"about {need:,.0f} MB into a fresh home (ops/storage/exhaustion.py). Free space there, or set SIMAB_HOME "
        "to a larger disk"
    )


def check_simulation(settings: Settings) -> None:
    """What the simulation settings ask together: user shards that each hold an agent,
    visits per activity tier that the design reads (three whole numbers ≥ 1, with
    `SIMAB_ACTIVITY_DRIVES=visits`), matched personas for a brain that reads them."""
    if settings.shards > 1:
        users = known_users(settings)  # None where the source does not say before it is read
        agents = min(n for n in (settings.agents, users, settings.shards) if n)
        if settings.shards > agents:
            who = (
                f"the {agents} agents per arm (SIMAB_AGENTS)"
                if agents == settings.agents
                else f"the {users} users of source {settings.source or 'synthetic'}"
            )
            raise SettingError(
                f"SIMAB_SHARDS={settings.shards}: more user shards than {who}: a shard would simulate no one; "
                f"at most {agents}"
            )
    if settings.visits is not None:
        shown = f"SIMAB_VISITS={','.join(str(v) for v in settings.visits)!r}"
        if len(settings.visits) != len(ACTIVITY_TIERS) or any(v < 1 for v in settings.visits):
            raise SettingError(
                f"{shown}: one whole number ≥ 1 per activity tier ({', '.join(ACTIVITY_TIERS)}), e.g. 1,2,3"
            )
        if (settings.activity_drives or "session_length") != "visits":
            raise SettingError(
                f"{shown}: read only with SIMAB_ACTIVITY_DRIVES=visits (here {settings.activity_drives or 'session_length'}, "
                "where the tier sets a session's length); set it, or unset SIMAB_VISITS"
            )
    if settings.persona == "matched" and not brain_of(settings).reads_personas:
        raise SettingError(
            f"SIMAB_PERSONA='matched': the {brain_of(settings).name} brain decides from the traits; matched personas "
            "are for a brain that reads them (SIMAB_BRAIN=llm, after the job simab_personas)"
        )


def check_report(settings: Settings) -> None:
    """The report's primary metric is one the read-out computes."""
    if settings.primary_metric is not None and settings.primary_metric not in METRICS:
        raise SettingError(f"SIMAB_PRIMARY_METRIC={settings.primary_metric!r}: one of {', '.join(METRICS)}")


def check_llm_endpoint(settings: Settings, environ: Mapping[str, str], probe: bool = False) -> None:
    """The endpoint's URL (absolute, http or https, no user:password); with `probe` (the
    LLM brain decides) the key where the endpoint needs one and one request that shows a
    server answers there."""
    url, origin = resolve_endpoint(settings.llm_base_url, environ)
    variable = {"base_url": "SIMAB_LLM_BASE_URL", "default": ""}.get(origin, origin)
    shown = (
        f"{variable}={redact(url)!r}" if variable else f"the default endpoint {url} (SIMAB_LLM_BASE_URL names another)"
    )
    problem = url_problem(url)
    if problem:
        raise SettingError(f"{shown}: {problem}")
    if not probe:
        return
    key_env = settings.llm_api_key_env or "OPENAI_API_KEY"
    if key_required(settings.llm_api_key_required, url) and not environ.get(key_env):
        raise SettingError(
            f"SIMAB_LLM_API_KEY_ENV={key_env!r}: ${key_env} is not set, and {redact(url)} needs a key "
            "(SIMAB_LLM_API_KEY_REQUIRED=false for a server that takes none)"
        )
    problem = endpoint_silent(url)
    if problem:
        raise SettingError(f"{shown}: {problem}")


def url_problem(url: str) -> str | None:
    """Why `url` cannot be an endpoint's base URL, or None."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        return "not an http(s) URL; e.g. http://127.0.0.1:8080/v1"
    if not parts.hostname:
        return "no host in the URL; e.g. http://127.0.0.1:8080/v1"
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return "the port is not a number"
    if parts.username is not None:
        return "user:password in the URL is refused; put the key in the environment (SIMAB_LLM_API_KEY_ENV)"
    return None


def endpoint_silent(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why no server answers at `url` (one GET of its model list), or None when one does —
    whatever its status: a 404 or a 401 comes from a server that is there."""
    parts = urlsplit(url.strip())
    target = parts._replace(path=parts.path.rstrip("/") + PROBE_PATH, fragment="").geturl()
    try:
        with urllib.request.urlopen(target, timeout=timeout_s):  # noqa: S310 - http(s) only (url_problem)
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"no server answers there ({redact(str(reason))}); start it, or correct the URL"
