"""Every value the settings name, checked before the first step: the brain (a name of the
brain registry), the lists files and MLflow models of the arms, the data source's folders and files, the folders and files of the
metadata, the LLM endpoint (a well-formed URL, the key where one is needed and, with the
LLM brain, one request that shows a server answers).  `check_values` raises `SettingError`
on the first fault, one line naming the variable, its value and what is wrong, so the runner
stops before any work instead of after the steps that come before the one the value breaks.

What only the data can say (a user or item a lists file names that the data lacks, a bad
row in the middle of a file) is still found by the step that reads it; here files are
checked as far as their header.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ops.arms.catalog import arm_class, spec_of
from ops.data.domain import DataFileError, check_files_folder
from ops.data.movielens import MovieLensFormatError, find_tables
from ops.preflight.bill import brain_of
from ops.settings import SettingError, Settings
from ops.simulation.brains.llm.endpoint import key_required, resolve_endpoint
from ops.web import redact

# One request to see that the endpoint answers: its list of models, which OpenAI, vLLM,
# llama.cpp and Ollama serve without cost; any HTTP answer (even 404) shows a server is there.
PROBE_PATH = "/models"
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
    check_source(settings)
    check_paths(settings)
    check_llm_endpoint(settings, env, probe=uses_llm)


def check_arms(settings: Settings, tracking_uri: Callable[[], str] | None = None) -> None:
    """Each arm's source, as its kind checks it (`ArmBase.source_problem`: a lists file's
    header, an MLflow model's URI)."""
    written = ",".join(spec_of(name).text() for name in settings.arms or ())
    for name in settings.arms or ():
        spec = spec_of(name)
        kind = arm_class(name)
        problem = kind.source_problem(spec.source, tracking_uri) if spec.source and kind is not None else None
        if problem:
            raise SettingError(f"SIMAB_ARMS={written!r}: arm {name}: {problem}")


def check_source(settings: Settings) -> None:
    """The data source's folder and files, as far as their headers."""
    source = settings.source or "synthetic"
    if source == "files":
        if not settings.files_path:
            raise SettingError(
                "SIMAB_SOURCE='files': needs SIMAB_FILES_PATH, the folder of interactions and items (docs/data_model.md)"
            )
        try:
            check_files_folder(settings.files_path)
        except DataFileError as exc:
            raise SettingError(f"SIMAB_FILES_PATH={settings.files_path!r}: {exc}") from None
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
