"""SimUSER Appendix C.7 (Figure 10): does the thumbnail's quality change the click rate?

Movies are sampled (with a poster), agents are sampled, and every agent is shown a home
page list of sampled movies it never rated, three times: with (1) the original poster,
(2) the poster under a blue colour filter, (3) a stand-in for the paper's random trailer
screenshot — no trailers here, so a 16:9 band across the middle of the poster, scaled back
to the poster's size: the film's imagery without the title block.  The lists, the agents
and their random draws are the same in every version (common random numbers), so a
difference in click rate comes from the posters alone.  Click rate = clicks ÷ home
impressions per agent (the read-out's CTR), with bootstrap intervals over agents and the
paired difference against the original (`ops.readout.ab_readout`).

How a version reaches a brain (`version_sources`): the LLM brain is shown the version's image
files (the catalogue's poster paths point at them); a brain that reads poster vectors (the
embedded brain, `BrainKind.reads_poster_vectors`) gets the version's poster features in
place of the originals (`embedded_with_posters`) — see `papers.EMBEDDED_POSTER_FEATURES` for
what those features can and cannot see.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl
from PIL import Image, ImageEnhance

from ops.agents.embeddings import load_poster
from ops.figures import pyplot, save_figure, table_markdown
from ops.readout.ab_readout import ab_readout
from ops.readout.readout_config import ReadoutConfig
from ops.readout.statistics import named_rng
from ops.simulation.assignment import sample_agents
from ops.simulation.catalogue import Catalogue
from ops.simulation.kinds import BrainKind, BrainSources
from ops.simulation.request import SimulationConfig
from ops.simulation.runner import simulate
from ops.studies.experiments.arm_tables import interval_cell
from ops.studies.experiments.papers import EMBEDDED_POSTER_FEATURES, THUMBNAILS

ORIGINAL = "original"
BLUE_FILTER = "blue_filter"
TRAILER_STAND_IN = "background_crop"
VERSIONS = (ORIGINAL, BLUE_FILTER, TRAILER_STAND_IN)
LABELS = {
    ORIGINAL: "original poster",
    BLUE_FILTER: "blue-filtered poster",
    TRAILER_STAND_IN: "background crop (trailer stand-in)",
}
# SimUSER's filter reads "hue=30, lightness=30, saturation=30": a colourise towards blue
# with lightness raised; these are our reading of it.
BLUE = (40, 90, 255)
BLUE_ALPHA = 0.45
LIGHTEN = 1.3
# A video frame's shape.
FRAME_ASPECT = 16 / 9


def poster_version(image, version: str):
    """The `version` of a poster image (PIL, RGB)."""
    image = image.convert("RGB")
    if version == ORIGINAL:
        return image
    if version == BLUE_FILTER:
        tinted = Image.blend(image, Image.new("RGB", image.size, BLUE), BLUE_ALPHA)
        return ImageEnhance.Brightness(tinted).enhance(LIGHTEN)
    if version == TRAILER_STAND_IN:
        w, h = image.size
        band = max(1, min(h, round(w / FRAME_ASPECT)))
        top = (h - band) // 2
        return image.crop((0, top, w, top + band)).resize((w, h))
    raise ValueError(f"unknown poster version {version!r}; expected one of {VERSIONS}")


def sample_movies(catalogue: pl.DataFrame, n_movies: int, seed: int) -> list[int]:
    """`n_movies` movies with a poster file, drawn without replacement (all when fewer)."""
    with_poster = catalogue.filter(pl.coalesce("poster_small", "poster_large").is_not_null())
    ids = [
        m
        for m, p in zip(
            with_poster.get_column("item_id").to_list(),
            with_poster.select(pl.coalesce("poster_small", "poster_large")).to_series().to_list(),
        )
        if Path(p).is_file()
    ]
    if not ids:
        raise ValueError("thumbnail experiment: no movie in the catalogue has a poster file")
    rng = named_rng(seed, "thumbnail-movies")
    return sorted(int(m) for m in rng.choice(np.asarray(sorted(ids)), min(n_movies, len(ids)), replace=False))


def write_versions(
    catalogue: pl.DataFrame, item_ids: Sequence[int], folder: Path, versions: Sequence[str] = VERSIONS
) -> dict[str, pl.DataFrame]:
    """Per version, the catalogue with the sampled movies' posters (small and large)
    replaced by that version's image, written under `folder`/<version>/<movie>.png."""
    chosen = set(int(m) for m in item_ids)
    sources = {
        int(r["item_id"]): r["poster_large"] or r["poster_small"]
        for r in catalogue.filter(pl.col("item_id").is_in(list(chosen))).iter_rows(named=True)
    }
    out = {}
    for version in versions:
        paths = {}
        for movie, source in sources.items():
            path = Path(folder) / version / f"{movie}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            poster_version(load_poster(source), version).save(path)
            paths[movie] = str(path)
        replaced = pl.col("item_id").replace_strict(paths, default=None, return_dtype=pl.Utf8)
        out[version] = catalogue.with_columns(
            poster_small=pl.when(pl.col("item_id").is_in(list(paths))).then(replaced).otherwise(pl.col("poster_small")),
            poster_large=pl.when(pl.col("item_id").is_in(list(paths))).then(replaced).otherwise(pl.col("poster_large")),
        )
    return out


def thumbnail_lists(
    users: Sequence[int], item_ids: Sequence[int], rated: pl.DataFrame, list_length: int = 20, seed: int = 0
) -> pl.DataFrame:
    """TOP_K rows (arm "thumbnails"): per user `list_length` sampled movies it never rated in
    `rated` (user_id, item_id), shuffled by the user's own stream."""
    seen = {u: set(ms) for u, ms in rated.group_by("user_id").agg("item_id").iter_rows()}
    pool = np.asarray(sorted(int(m) for m in item_ids), dtype=np.int64)
    rows = []
    for user in sorted(int(u) for u in users):
        candidates = np.asarray([m for m in pool if m not in seen.get(user, ())], dtype=np.int64)
        if candidates.size == 0:
            continue
        rng = named_rng(seed, "thumbnail-list", user)
        chosen = rng.choice(candidates, min(list_length, candidates.size), replace=False)
        rows += [("thumbnails", user, rank + 1, int(m), float(list_length - rank)) for rank, m in enumerate(chosen)]
    return pl.DataFrame(
        rows,
        schema={"arm": pl.Utf8, "user_id": pl.Int64, "rank": pl.Int64, "item_id": pl.Int64, "score": pl.Float64},
        orient="row",
    )


def simulate_versions(
    lists: pl.DataFrame,
    sessions,
    kind: BrainKind,
    sources: Mapping[str, BrainSources],
    seed: int = 0,
    run_id: str = "",
) -> pl.DataFrame:
    """Every agent on its list once per version, each with a brain of `kind` made from that
    version's sources (`version_sources`); events with `arm` = the version.  The agents'
    random draws are the same in every version (common random numbers)."""
    config = SimulationConfig(common_random_numbers=True)
    frames = []
    for version, version_sources in sources.items():
        brain = kind.brain(version_sources)
        try:
            events = simulate(
                brain,
                sessions,
                lists,
                version_sources.catalogue,
                config,
                seed=seed,
                run_id=run_id,
                concurrency=kind.concurrency(version_sources),
            )
        finally:
            close = getattr(brain, "close", None)
            if close is not None:
                close()
        frames.append(events.with_columns(arm=pl.lit(version)))
    return pl.concat(frames, how="vertical_relaxed")


def version_sources(sources: BrainSources, catalogue, poster_rows: Mapping[int, np.ndarray] | None) -> BrainSources:
    """The sources a brain sees a version from: the version's catalogue (its poster files),
    and for a brain that reads poster vectors (`BrainKind.reads_poster_vectors`) the fitted
    embedded brain with the version's poster rows (`embedded_with_posters`); None: the
    original posters."""
    embedded = sources.get("embedded")
    return sources.replace(
        catalogue=catalogue, embedded=embedded if not poster_rows else embedded_with_posters(embedded, poster_rows)
    )


def thumbnail_table(events: pl.DataFrame, config: ReadoutConfig | None = None) -> tuple[pl.DataFrame, object]:
    """Per version: agents, click rate (CTR) with its interval, the paired difference
    against the original poster with its interval and p-value; and the read-out itself."""
    config = (config or ReadoutConfig()).model_copy(update={"metrics": ("ctr", "cvr")})
    readout = ab_readout(events, control=ORIGINAL, config=config)
    arms = {r["arm"]: r for r in readout.arms.filter(pl.col("metric") == "ctr").iter_rows(named=True)}
    diffs = {r["arm"]: r for r in readout.comparisons.filter(pl.col("metric") == "ctr").iter_rows(named=True)}
    rows = []
    for version in [v for v in VERSIONS if v in arms]:
        a, d = arms[version], diffs.get(version, {})
        rows.append(
            {
                "version": version,
                "thumbnail": LABELS[version],
                "agents": a["n_agents"],
                "click_rate": a["mean"],
                "ci_low": a["ci_low"],
                "ci_high": a["ci_high"],
                "difference_vs_original": d.get("difference", 0.0 if version == ORIGINAL else None),
                "difference_ci_low": d.get("ci_low"),
                "difference_ci_high": d.get("ci_high"),
                "p_value": d.get("p_value"),
            }
        )
    schema = {
        "version": pl.Utf8,
        "thumbnail": pl.Utf8,
        "agents": pl.Int64,
        "click_rate": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "difference_vs_original": pl.Float64,
        "difference_ci_low": pl.Float64,
        "difference_ci_high": pl.Float64,
        "p_value": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema), readout


def thumbnail_figure(table: pl.DataFrame):
    """Figure 10's bars: click rate per thumbnail version with 95 % intervals."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    x = np.arange(table.height)
    rate = table.get_column("click_rate").to_numpy()
    lo, hi = table.get_column("ci_low").to_numpy(), table.get_column("ci_high").to_numpy()
    ax.bar(x, rate, yerr=[rate - lo, hi - rate], capsize=5, color=["#4c72b0", "#8172b2", "#937860"][: table.height])
    ax.set_xticks(x, [LABELS[v] for v in table.get_column("version").to_list()], rotation=12, ha="right", fontsize=8)
    ax.set_ylabel("click rate (clicks / home impressions)")
    ax.set_title("Thumbnail quality (SimUSER App. C.7), 95 % CI over agents", fontsize=9)
    fig.tight_layout()
    return fig


def embedded_with_posters(model, poster_rows: Mapping[int, np.ndarray]):
    """A copy of a fitted embedded brain (EmbeddedBrainModel) whose catalogue shows other
    posters for some movies: their rows of the poster feature matrix replaced.  The
    catalogue's digest is kept on purpose — the parameters and the agents' memories belong
    to this catalogue; only what the posters look like changes."""
    vectors = model.context.vectors
    poster = vectors.poster.copy()
    if poster.shape[1] == 0:
        return model  # no poster features at all: every version looks the same to it
    rows = vectors.rows_of(list(poster_rows))
    poster[rows] = np.vstack([np.asarray(poster_rows[m], dtype=np.float32) for m in poster_rows])
    context = dataclasses.replace(model.context, vectors=dataclasses.replace(vectors, poster=poster))
    return dataclasses.replace(model, context=context)


@dataclasses.dataclass(frozen=True)
class ThumbnailExperiment:
    """SimUSER App. C.7 as run: the table (`thumbnail_table`), the events per version, the
    figure, and the body and notes of its page."""

    table: pl.DataFrame
    events: pl.DataFrame
    figure: Path
    body: list[str]
    notes: list[str]


def thumbnail_experiment(
    kind: BrainKind,
    sources: BrainSources,
    agents,
    catalogue: pl.DataFrame,
    train: pl.DataFrame,
    folder: Path,
    *,
    brain: str,
    n_movies: int = 100,
    n_agents: int = 100,
    list_length: int = 20,
    seed: int = 0,
    run_id: str = "",
    poster_vectors: Callable[[dict, list[int]], dict] | None = None,
) -> ThumbnailExperiment:
    """Sample `n_movies` movies and `n_agents` agents, write each poster version under
    `folder`/posters, give each agent a home page of `list_length` of the sampled movies it
    never rated, and let brain `kind` (named `brain` in the text) browse it once per version.
    A brain that reads poster vectors gets each version's from `poster_vectors(frames, item_ids)`
    (version -> movie id -> vector; the original version is the fitted brain's own)."""
    item_ids = sample_movies(catalogue, n_movies, seed)
    users = sample_agents(sorted(agents.profiles), n_agents, seed)
    lists = thumbnail_lists(users, item_ids, train, list_length, seed)
    users = sorted(set(lists.get_column("user_id").to_list()))
    frames = write_versions(catalogue, item_ids, folder / "posters")
    posters = poster_vectors(frames, item_ids) if kind.reads_poster_vectors and poster_vectors is not None else {}
    by_version = {v: version_sources(sources, Catalogue.from_frame(frames[v]), posters.get(v)) for v in VERSIONS}
    events = simulate_versions(lists, agents.sessions(users), kind, by_version, seed=seed, run_id=run_id)
    table, _ = thumbnail_table(events)
    figure = save_figure(thumbnail_figure(table), folder / "plots" / "thumbnails.png")
    shown = table.select(
        "thumbnail",
        "agents",
        pl.struct("click_rate", "ci_low", "ci_high")
        .map_elements(lambda r: interval_cell(r["click_rate"], r["ci_low"], r["ci_high"]), return_dtype=pl.Utf8)
        .alias("click rate [95 % CI]"),
        pl.struct("difference_vs_original", "difference_ci_low", "difference_ci_high")
        .map_elements(
            lambda r: interval_cell(r["difference_vs_original"], r["difference_ci_low"], r["difference_ci_high"]),
            return_dtype=pl.Utf8,
        )
        .alias("vs original [95 % CI]"),
        pl.col("p_value").round(4),
    )
    body = [
        f"{len(item_ids)} movies, {len(users)} agents, {brain} brain; click rate = clicks ÷ home impressions per agent.",
        "",
        table_markdown(shown),
        "",
        f"Paper: {THUMBNAILS}",
        "",
    ]
    notes = (
        ["## What the embedded brain's poster features can and cannot see", "", EMBEDDED_POSTER_FEATURES]
        if kind.reads_poster_vectors
        else []
    )
    return ThumbnailExperiment(table, events, figure, body, notes)
