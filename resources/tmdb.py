"""TMDB as a Dagster resource: crawl settings as config, credentials from the environment.

The key is never a config field: Dagster shows resource config in the UI and stores it
with every run.  The resource holds only the *names* of the environment variables and
reads them when a crawl starts (`TMDB_READ_TOKEN`, a bearer token, preferred over
`TMDB_API_KEY`, the v3 key).  All crawl logic lives in `ops.data.tmdb`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl
from dagster import ConfigurableResource
from pydantic import Field

from ops.data.tmdb import API_KEY_ENV, READ_TOKEN_ENV, CrawlResult, TmdbClient, TmdbConfig, TmdbCredentials, crawl_tmdb

_DEFAULTS = TmdbConfig()


class TmdbResource(ConfigurableResource):
    """Settings of the TMDB crawl (defaults: `ops.data.tmdb.TmdbConfig`)."""

    api_base_url: str = _DEFAULTS.api_base_url
    image_base_url: str = _DEFAULTS.image_base_url
    rate_limit_rps: float = Field(_DEFAULTS.rate_limit_rps, description="requests per second, all threads together")
    concurrency: int = _DEFAULTS.concurrency
    poster_small_size: str = Field(_DEFAULTS.poster_small_size, description="home-page poster (A/B Agent §2.3.1)")
    poster_large_size: str = Field(_DEFAULTS.poster_large_size, description="detail-page poster (A/B Agent §2.3.1)")
    download_posters: bool = _DEFAULTS.download_posters
    top_actors: int = _DEFAULTS.top_actors
    language: str = _DEFAULTS.language
    max_attempts: int = _DEFAULTS.max_attempts
    connect_timeout_s: float = _DEFAULTS.connect_timeout_s
    read_timeout_s: float = _DEFAULTS.read_timeout_s
    min_title_similarity: float = _DEFAULTS.match.min_title_similarity
    progress: bool = _DEFAULTS.progress
    # Names of the environment variables, never their values.
    api_key_env_var: str = API_KEY_ENV
    read_token_env_var: str = READ_TOKEN_ENV

    def crawl_config(self) -> TmdbConfig:
        return TmdbConfig(
            api_base_url=self.api_base_url,
            image_base_url=self.image_base_url,
            rate_limit_rps=self.rate_limit_rps,
            concurrency=self.concurrency,
            poster_small_size=self.poster_small_size,
            poster_large_size=self.poster_large_size,
            download_posters=self.download_posters,
            top_actors=self.top_actors,
            language=self.language,
            max_attempts=self.max_attempts,
            connect_timeout_s=self.connect_timeout_s,
            read_timeout_s=self.read_timeout_s,
            progress=self.progress,
            match=_DEFAULTS.match.model_copy(update={"min_title_similarity": self.min_title_similarity}),
        )

    def has_credentials(self) -> bool:
        return bool(os.environ.get(self.api_key_env_var) or os.environ.get(self.read_token_env_var))

    def credentials(self) -> TmdbCredentials:
        """Read now from the environment; raises MissingCredentialsError naming the variables."""
        return TmdbCredentials.from_env(api_key_var=self.api_key_env_var, read_token_var=self.read_token_env_var)

    def client(self) -> TmdbClient:
        return TmdbClient(self.crawl_config(), self.credentials())

    def crawl(self, movies: pl.DataFrame, out_dir: str | Path, links: pl.DataFrame | None = None) -> CrawlResult:
        return crawl_tmdb(movies, out_dir, self.crawl_config(), links=links, credentials=self.credentials())

    def tracking_params(self) -> dict[str, Any]:
        """Settings safe to log as MLflow parameters (no credential, only which kind is used)."""
        params = self.crawl_config().model_dump(exclude={"match", "posters"})
        params["min_title_similarity"] = self.min_title_similarity
        params["auth"] = (
            "bearer"
            if os.environ.get(self.read_token_env_var)
            else ("api_key" if os.environ.get(self.api_key_env_var) else "none")
        )
        return params
