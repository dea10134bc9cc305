"""Every `SIMAB_*` setting, declared once: its variable, type, allowed values, default and
what it feeds; and the order in which a value reaches a step (`PRECEDENCE`), written here
once.  This module is the only place that reads the settings from the environment.

One concept, the settings: long because each is declared here whole, with where it is read.

Adding a setting: one `setting(...)` field below (variable, help, the resource field it
feeds), and, where it configures ops, its op config fields in `pipelines/setting_ops.py`,
beside the jobs.  docs/settings.md — the precedence and the table of every setting — is
generated from both (`python -m pipelines.settings_page > docs/settings.md`) and a test
checks it is current.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Gt
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ops.setting_values import allowed_words, time_zone

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# The LLM spending limit of a run where the endpoint has a price and nobody set one
# (`SIMAB_MAX_COST_USD`; `none` lifts it): a few dollars, docs/cost.md.
DEFAULT_MAX_COST_USD = 5.0
# The control arm of the read-out where nobody names one (`SIMAB_CONTROL`): A/B Agent
# compares every arm against Pop (Table 2).
DEFAULT_CONTROL = "pop"
# A setting whose value is this word lifts the resource field it feeds (None there).
NO_LIMIT = "none"

# The values the asset configs accept, defined here once and imported by them.
Source = Literal["synthetic", "local", "download", "files", "steam", "steam-download"]
Dataset = Literal["ml-1m", "ml-100k"]
MetadataSource = Literal["auto", "synthetic", "local", "tmdb", "none"]
Persona = Literal["traits", "matched"]
ActivityDrives = Literal["session_length", "visits"]
ClickCalibration = Literal["list_response", "random_exposure"]
Nightly = Literal["fresh", "continue"]
Deployment = Literal["local", "server"]
Executor = Literal["in_process", "multiprocess", "celery"]


TimeZone = Annotated[str, AfterValidator(time_zone)]


# Where a step's value comes from, highest first (docs/settings.md is generated from it).
PRECEDENCE = (
    "the run config a person edits in the Dagster launchpad (or passes to a job);",
    "`--set OP.FIELD=VALUE` of `python -m pipelines.experiments`: one field of one op's config, "
    "its value JSON (or a plain string), written into the run config over the environment's;",
    "the environment: the `SIMAB_*` variables (and MLflow's `MLFLOW_TRACKING_URI`), read only by "
    "`ops/settings.py`, once, when the code location loads or the lifecycle runner starts, and "
    "turned into each job's default run config and the resources' fields by `pipelines/run_config.py` "
    "and `pipelines/jobs.py`;",
    "the defaults of the asset configs and resources (the papers' settings).",
)
# What the levels mean in practice, beside them in docs/settings.md.
PRECEDENCE_NOTES = (
    "A variable that is not set (or set to the empty string) leaves the defaults alone: only what the "
    "environment names is written into run config.  `simab settings` (or `python -m ops.settings`) prints "
    "the settings in effect; a bad value stops `simab run` before any work with one line naming the "
    "variable, the value and what is allowed."
)


class SettingError(ValueError):
    """A setting the environment got wrong: one line, variable, value, what is allowed."""


_UNDECLARED = object()


def setting(
    default: Any,
    env: str,
    help: str,
    *,
    resource: str = "",
    sep: str = "",
    config_default: Any = _UNDECLARED,
    **bounds,
):
    """A settings field: `env` its variable, `resource` the resource field it sets
    ("llm.model"), `sep` the separator of a list value; `config_default` the value the op
    config fields it fills (`pipelines.setting_ops`) take when the variable is not set, written here once (the asset configs read it with `config_default(name)`, the
    settings table shows it); `bounds` are pydantic's (ge, le, ...)."""
    extra = {"env": env, "resource": resource, "sep": sep}
    if config_default is not _UNDECLARED:
        extra["config_default"] = config_default
    return Field(default, description=help, json_schema_extra=extra, **bounds)


class Settings(BaseModel):
    """What the environment asked for.  None: not set, the asset's or resource's own default
    stays (the default shown in docs/settings.md is that one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # -- data
    source: Source | None = setting(
        None,
        "SIMAB_SOURCE",
        "data source: synthetic (offline) | local | download (MovieLens) | files (your own, docs/data_model.md) | steam "
        "| steam-download (the UCSD originals)",
        config_default="synthetic",
    )
    files_path: str | None = setting(
        None,
        "SIMAB_FILES_PATH",
        "folder of interactions, items (CSV or Parquet), optional users, images/, dataset.json (source files)",
    )
    steam_path: str | None = setting(
        None,
        "SIMAB_STEAM_PATH",
        "folder of the Steam interactions.csv and items.jsonl (source steam; default $SIMAB_SHARED_DATA/steam-australian)",
    )
    steam_url: str | None = setting(
        None,
        "SIMAB_STEAM_URL",
        "source steam-download: a base URL serving australian_user_reviews.json.gz and steam_games.json.gz "
        "(default: the UCSD McAuley lab's addresses, ops/data/steam_download.py)",
    )
    steam_sha256_reviews: str | None = setting(
        None,
        "SIMAB_STEAM_SHA256_REVIEWS",
        "source steam-download: SHA-256 australian_user_reviews.json.gz must have (default: none pinned; "
        "the digest downloaded is recorded in the ingestion metadata)",
        pattern=r"^[0-9a-fA-F]{64}$",
    )
    steam_sha256_games: str | None = setting(
        None,
        "SIMAB_STEAM_SHA256_GAMES",
        "source steam-download: SHA-256 steam_games.json.gz must have (default: none pinned)",
        pattern=r"^[0-9a-fA-F]{64}$",
    )
    steam_min_interactions: int | None = setting(
        None,
        "SIMAB_STEAM_MIN_INTERACTIONS",
        "sources steam, steam-download: keep users with at least this many dated reviews of games with metadata",
        config_default=5,
        ge=1,
    )
    local_path: str | None = setting(
        None,
        "SIMAB_LOCAL_PATH",
        "folder of ML-1M `*.dat` or ML-100K `u.*` files (source local)",
    )
    dataset: Dataset | None = setting(None, "SIMAB_DATASET", "archive for source download", config_default="ml-1m")
    synthetic_exposure_bias: float | None = setting(
        None,
        "SIMAB_SYNTHETIC_EXPOSURE_BIAS",
        "source synthetic: how strongly the log's production system led with the popular (0 = a log free of "
        "exposure, 1 = the default world, 2.5 strong; docs/definitions.md#the-truth)",
        config_default=1.0,
        ge=0,
    )
    metadata_source: MetadataSource | None = setting(
        None,
        "SIMAB_METADATA_SOURCE",
        "metadata and posters",
        config_default="auto",
    )
    metadata_path: str | None = setting(
        None,
        "SIMAB_METADATA_PATH",
        "local metadata file (e.g. movies_extrainfos.dat)",
    )
    poster_dirs: list[str] | None = setting(
        None,
        "SIMAB_POSTER_DIRS",
        "folders of `<item_id>.jpg` posters, in order of preference",
        sep=os.pathsep,
    )
    links_path: str | None = setting(
        None,
        "SIMAB_LINKS_PATH",
        "MovieLens links table (movieId, imdbId, tmdbId)",
    )
    # -- arms
    arms: list[str] | None = setting(
        None,
        "SIMAB_ARMS",
        "the arms of a full run, the schedule and the sensor (default random,pop,fm,deepfm, and mirror with a brain that decides offline): names or specs, "
        "`name=lists:PATH`, `name=mlflow:models:/m/1`, `name=kind;param=value` (docs/arms.md), "
        "`pop@5` (Pop's lists with 5 of 20 slots replaced by random unseen items)",
        sep=",",
    )
    max_epochs: int | None = setting(
        None,
        "SIMAB_MAX_EPOCHS",
        "epochs of the CTR arms and their refits (default 20, early stop)",
        ge=1,
    )
    validation_negatives: float | None = setting(
        None,
        "SIMAB_VALIDATION_NEGATIVES",
        "unrated pairs per validation row added as negatives for the CTR arms' early stopping (default: 1 where the data is implicit feedback, e.g. steam, else 0)",
        ge=0,
    )
    control: str | None = setting(
        None,
        "SIMAB_CONTROL",
        "the control arm of the read-out",
        config_default=DEFAULT_CONTROL,
    )
    # -- simulation
    click_calibration: ClickCalibration | None = setting(
        None,
        "SIMAB_CLICK_CALIBRATION",
        "what sets the embedded brain's click decision: list_response (real users' response to list quality on the "
        "validation window) | random_exposure (a seeded half of the run's random bucket with clicks: the users' own "
        "click level on random items; the other half judges; list_response where the run has none)",
        config_default="list_response",
    )
    agents: int | None = setting(
        None,
        "SIMAB_AGENTS",
        "agents simulated per arm, a seeded sample (0 = every user with a list)",
        config_default=0,
        ge=0,
    )
    brain: str | None = setting(
        None,
        "SIMAB_BRAIN",
        "who decides, a brain of the registry (`python -m ops.simulation.kinds` lists them): embedded (offline), "
        "llm (the `llm` resource), uniform-random, or a plug-in's; `-no-vision` after the name (or `;vision=false`): "
        "without posters; a kind's own parameters as `name;key=value`",
        config_default="embedded",
    )
    sessions: int | None = setting(
        None,
        "SIMAB_SESSIONS",
        "independent sessions of every agent on an arm",
        config_default=1,
        ge=1,
    )
    activity_drives: ActivityDrives | None = setting(
        None,
        "SIMAB_ACTIVITY_DRIVES",
        "what the activity tier changes: session_length (A/B Agent) | visits (how often the agent comes)",
        config_default="session_length",
    )
    visits: list[int] | None = setting(
        None,
        "SIMAB_VISITS",
        "with visits: sessions per agent for the low, medium, high activity tiers",
        config_default=[1, 2, 3],
        sep=",",
    )
    persona: Persona | None = setting(
        None,
        "SIMAB_PERSONA",
        "LLM brain: traits | matched (job simab_personas first)",
        config_default="traits",
    )
    rounds: int = setting(
        4, "SIMAB_ROUNDS", "rounds of the Agent4Rec feedback loop, one partition each (Agent4Rec: 4)", ge=1
    )
    nightly: Nightly = setting(
        "fresh",
        "SIMAB_NIGHTLY",
        "the nightly schedule: fresh re-simulates every arm; continue runs each arm's next round",
    )
    # -- read-out
    eval_users: int | None = setting(
        None,
        "SIMAB_EVAL_USERS",
        "test-window users the offline ranking metrics (Recall@20, NDCG@20) and the social traits' real side are "
        "measured on, a seeded sample whose 95 % intervals say so: as many as a ±0.01 interval on a per-user figure "
        "in [0, 1] needs; every test user where the window has fewer (0 = every test user always)",
        # ⌈(1.96 · 0.5 / 0.01)²⌉ (ops.studies.alignment.sizing's rule at ±0.01): the offline
        # metrics' intervals stay as narrow as that whatever the log's size, and a log with
        # fewer test users (the demo, ML-1M) is measured on every one of them, as before.
        config_default=9604,
        ge=0,
    )
    alignment_agents: int | None = setting(
        None,
        "SIMAB_ALIGNMENT_AGENTS",
        "agents of each alignment protocol (default: as many as SIMAB_TRUST_HALF_WIDTH needs, 97 for ±0.10; 0 = all)",
        ge=0,
    )
    trust_protocols: bool | None = setting(
        None,
        "SIMAB_TRUST_PROTOCOLS",
        "the trust protocols that ask the brain (taste, rating, list quality): on | off — not run, "
        "reported as not measured; the A/B verdict and the fidelity need no LLM call and stay",
        config_default=True,
    )
    trust_half_width: float | None = setting(
        None,
        "SIMAB_TRUST_HALF_WIDTH",
        "the half-width of the 95 % intervals (taste F1, click rates) the trust protocols are sized for",
        config_default=0.1,
        gt=0,
        le=0.5,
    )
    fidelity_tau_floor: float | None = setting(
        None,
        "SIMAB_FIDELITY_TAU_FLOOR",
        "Kendall τ(CTR, NDCG@20), or the arm pairs' τ with a missed pair counted as a tie, below this warns",
        config_default=0.6,
        ge=-1,
        le=1,
    )
    list_quality_spread_floor: float | None = setting(
        None,
        "SIMAB_LIST_QUALITY_SPREAD_FLOOR",
        "the brain's CTR on the list-quality protocol's 1:1 lists minus on its 1:9 lists with its whole interval "
        "below this (or below the larger spread the sensitivity ladder implies) warns that it cannot tell lists apart",
        config_default=0.02,
        ge=0,
        le=1,
    )
    primary_metric: str | None = setting(
        None,
        "SIMAB_PRIMARY_METRIC",
        "the metric the report's verdict opens on",
        config_default="ctr",
    )
    # -- the LLM endpoint (resource `llm`)
    llm_base_url: str | None = setting(
        None,
        "SIMAB_LLM_BASE_URL",
        "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 (default $OPENAI_BASE_URL, else OpenAI)",
        resource="llm.base_url",
    )
    llm_model: str | None = setting(None, "SIMAB_LLM_MODEL", "model name the endpoint serves", resource="llm.model")
    llm_api_key_env: str | None = setting(
        None,
        "SIMAB_LLM_API_KEY_ENV",
        "NAME of the variable holding the key (default OPENAI_API_KEY); the key itself is never a setting",
        resource="llm.api_key_env",
    )
    llm_api_key_required: bool | None = setting(
        None,
        "SIMAB_LLM_API_KEY_REQUIRED",
        "whether the endpoint needs a key (default: not on the loopback — 127.0.0.1, localhost, ::1 — else yes)",
        resource="llm.api_key_required",
    )
    llm_vision: bool | Literal["auto"] | None = setting(
        None,
        "SIMAB_LLM_VISION",
        "posters as images (true), palette captions (false), or auto (default: probe the endpoint once)",
        resource="llm.vision",
    )
    llm_structured_output: Literal["auto", "json_schema", "json_object", "text"] | None = setting(
        None,
        "SIMAB_LLM_STRUCTURED_OUTPUT",
        "response_format: a strict JSON schema per request, any JSON object, plain text, or auto (default: probe "
        "the endpoint once, the first it takes)",
        resource="llm.structured_output",
    )
    llm_concurrency: int | None = setting(
        None, "SIMAB_LLM_CONCURRENCY", "requests in flight at once", resource="llm.concurrency", ge=1
    )
    llm_trace_share: float | None = setting(
        None,
        "SIMAB_LLM_TRACE_SHARE",
        "share of the simulated agent sessions traced in MLflow, one trace each with a span per LLM call (default "
        "0.05: a 1,000-agent run keeps about 50 traces); 0: none",
        resource="llm.trace_share",
        ge=0,
        le=1,
    )
    llm_timeout_s: float | None = setting(
        None, "SIMAB_LLM_TIMEOUT_S", "seconds one HTTP request may take", resource="llm.timeout_s", gt=0
    )
    llm_price_prompt_per_1m: float | None = setting(
        None,
        "SIMAB_LLM_PRICE_PROMPT_PER_1M",
        "USD per 1M prompt tokens (the bill)",
        resource="llm.price_prompt_per_1m",
        ge=0,
    )
    llm_price_completion_per_1m: float | None = setting(
        None,
        "SIMAB_LLM_PRICE_COMPLETION_PER_1M",
        "USD per 1M completion tokens",
        resource="llm.price_completion_per_1m",
        ge=0,
    )
    max_cost_usd: Annotated[float, Gt(0)] | Literal["none"] | None = setting(
        None,
        "SIMAB_MAX_COST_USD",
        f"the LLM spending limit of a run, in USD (default {DEFAULT_MAX_COST_USD:g} where the endpoint has a price); "
        "none: no limit, said explicitly (docs/cost.md)",
        resource="llm.max_cost_usd",
    )
    # -- a real model for tests/test_real_llm.py (CI: `eval "$(.ci/llama_server.sh)"`)
    llama_server: Path | None = setting(
        None, "SIMAB_LLAMA_SERVER", "llama.cpp's `llama-server` binary the real-LLM test starts on 127.0.0.1"
    )
    llama_model: Path | None = setting(None, "SIMAB_LLAMA_MODEL", "the GGUF model that test serves (Gemma 3 270M)")
    # -- scale
    shards: int = setting(1, "SIMAB_SHARDS", "user shards of the simulation (1: one partition per arm)", ge=1)
    partition_lock_timeout_s: float = setting(
        300.0,
        "SIMAB_PARTITION_LOCK_TIMEOUT_S",
        "seconds a second run of one simulation partition waits for the first to finish, then fails naming it",
        ge=0,
    )
    home_wait_s: float = setting(
        0.0,
        "SIMAB_HOME_WAIT_S",
        "seconds a lifecycle or a launched run waits for a home another one holds (0: refused at once, naming it)",
        ge=0,
    )
    deployment: Deployment = setting(
        "local", "SIMAB_DEPLOYMENT", "local (SQLite MLflow store) | server (MLflow at $MLFLOW_TRACKING_URI)"
    )
    schedule_timezone: TimeZone = setting(
        "UTC", "SIMAB_SCHEDULE_TIMEZONE", "the time zone of the nightly schedule's 02:00 (its execution_timezone)"
    )
    max_concurrent_runs: int = setting(
        2,
        "SIMAB_MAX_CONCURRENT_RUNS",
        "runs the Dagster instance starts at once from its queue (dagster.yaml `concurrency.runs`): a backfill of "
        "every arm from the UI, the nightly schedule's arms",
        ge=1,
    )
    arm_pool_limit: int = setting(
        2,
        "SIMAB_ARM_POOL_LIMIT",
        "steps of the arm assets (pool `simab_arms`: training, ranking, simulation) in progress at once across all "
        "runs of the instance (dagster.yaml `concurrency.pools`)",
        ge=1,
    )
    # in_process by default: on the tiny world and two cores it is the fastest of the three
    # (docs/findings/executors.md), since every other one rebuilds the definitions per step.
    executor: Executor = setting(
        "in_process",
        "SIMAB_EXECUTOR",
        "the executor of every run, `simab run`'s too: in_process (each run's steps one after another in its "
        "process) | multiprocess (steps as processes of this machine; the lifecycle's arms side by side) | celery "
        "(workers on $SIMAB_CELERY_BROKER)",
    )
    concurrency: int = setting(
        2,
        "SIMAB_CONCURRENCY",
        "with the multiprocess or celery executor: the lifecycle's independent steps (its arms) run at once, and "
        "the steps of one run the multiprocess executor runs at once",
        ge=1,
    )
    celery_broker: str = setting(
        "", "SIMAB_CELERY_BROKER", "broker of the celery executor, e.g. redis://127.0.0.1:6379/0"
    )
    celery_backend: str = setting(
        "", "SIMAB_CELERY_BACKEND", "result backend of the celery executor (default: the broker)"
    )
    mlflow_tracking_uri: str = setting(
        "", "MLFLOW_TRACKING_URI", "MLflow's own variable: the tracking server (deployment server)"
    )
    # -- places
    home: Path = setting(
        PROJECT_ROOT / "data", "SIMAB_HOME", "the data folder: assets, MLflow store, caches, reports, logs"
    )
    embedding_cache: Path | None = setting(
        None,
        "SIMAB_EMBEDDING_CACHE",
        "the catalogue embeddings' cache folder (rows keyed by model and content); homes that name the same "
        "folder embed a catalogue once between them (default: $SIMAB_HOME/cache/embeddings)",
        resource="embeddings.cache_dir",
    )
    viewer_url: str = setting("http://127.0.0.1:8050", "SIMAB_VIEWER_URL", "the trajectory viewer's address in links")
    dagster_ui_url: str = setting("http://127.0.0.1:3000", "SIMAB_DAGSTER_UI_URL", "the Dagster UI's address in links")
    mlflow_ui_url: str = setting("http://127.0.0.1:5000", "SIMAB_MLFLOW_UI_URL", "the MLflow UI's address in links")
    shared_data: Path = setting(
        PROJECT_ROOT.parent / "shared" / "data",
        "SIMAB_SHARED_DATA",
        "reference data for benchmarks and real-data tests (never shipped)",
    )

    # Not from the environment: `--set OP.FIELD=VALUE` of `python -m pipelines.experiments`
    # (`PRECEDENCE`).
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def mlflow_store(self, tracking_uri: str = "") -> str:
        """Where MLflow runs go, highest first: `tracking_uri` (the `mlflow_tracking`
        resource's field), `$MLFLOW_TRACKING_URI`, the SQLite store in the home
        (`$SIMAB_HOME/mlflow.db`)."""
        return tracking_uri or self.mlflow_tracking_uri or f"sqlite:///{self.home.resolve() / 'mlflow.db'}"

    def resource_fields(self, resource: str) -> dict[str, Any]:
        """The fields of one resource (e.g. "llm") that the environment set."""
        out = {}
        for name, info in declared().items():
            target = _extra(info)["resource"]
            value = getattr(self, name)
            if target and target.split(".")[0] == resource and value is not None:
                value = str(value) if isinstance(value, Path) else value  # resources' fields are plain strings
                out[target.split(".")[1]] = None if value == NO_LIMIT else value
        return out


def declared() -> dict:
    """The settings that come from a variable, by field name."""
    return {name: info for name, info in Settings.model_fields.items() if info.json_schema_extra}


@contextmanager
def exported(**values) -> Iterator[None]:
    """Inside the block the environment carries these settings (by field name: a list joined by
    its separator), as a process started from here reads them (`load`); as it was after."""
    fields = declared()
    saved = {}
    for name, value in values.items():
        extra = _extra(fields[name])
        saved[extra["env"]] = os.environ.get(extra["env"])
        text = extra["sep"].join(value) if isinstance(value, list) else str(value)
        os.environ[extra["env"]] = text
    try:
        yield
    finally:
        for env, before in saved.items():
            if before is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = before


def config_default(name: str) -> Any:
    """The default of the op config fields setting `name` fills (a fresh copy of a list)."""
    extra = _extra(Settings.model_fields[name])
    if "config_default" not in extra:
        raise KeyError(f"setting {name} ({extra['env']}) declares no config_default")
    value = extra["config_default"]
    return list(value) if isinstance(value, list) else value


def _extra(info) -> dict:
    return info.json_schema_extra  # type: ignore[return-value]


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings the environment asks for; raises SettingError on the first bad value."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for name, info in declared().items():
        extra = _extra(info)
        raw = env.get(extra["env"])
        if raw is None or not raw.strip():
            continue
        raw = raw.strip()
        if raw.lower() == NO_LIMIT:
            raw = NO_LIMIT
        value: Any = [p.strip() for p in raw.split(extra["sep"]) if p.strip()] if extra["sep"] else raw
        try:
            values[name] = _adapter(name).validate_python(value)
        except ValidationError:
            raise SettingError(f"{extra['env']}={raw!r}: {allowed(name)}") from None
    return Settings(**values)


# The settings the edge read (`install`), for the places below it that are not handed them.
_installed: Settings | None = None


def install(settings: Settings) -> Settings:
    """Make `settings` this process's: the code location installs the settings it is built
    from (`pipelines.definitions.build_definitions`, which the lifecycle and experiments
    runners and the viewer build too), so every place below it sees the values its run
    config and resources were made of."""
    global _installed
    _installed = settings
    return settings


def current() -> Settings:
    """The settings the edge installed.  Where no edge ran (a test or a benchmark calling a
    function directly) the environment's, read now."""
    return _installed if _installed is not None else load()


def uninstall() -> None:
    """Forget the installed settings (between tests, so one test's edge does not leak)."""
    global _installed
    _installed = None


def _adapter(name: str) -> TypeAdapter:
    info = Settings.model_fields[name]
    return TypeAdapter(Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation)


def allowed(name: str) -> str:
    """What a setting accepts, in words (for errors and docs/settings.md)."""
    return allowed_words(Settings.model_fields[name])


if __name__ == "__main__":
    try:
        current = load()
    except SettingError as exc:
        raise SystemExit(f"simab: {exc}") from None
    for key, info in declared().items():
        value = getattr(current, key)
        print(f"{_extra(info)['env']}={'' if value is None else value}")
