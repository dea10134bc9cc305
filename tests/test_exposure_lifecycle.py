"""SIMAB_CLICK_CALIBRATION=random_exposure through the asset graph: on the prepared synthetic
world (its random bucket), the agents asset builds the bucket's calibration half, the
embedded brain's click decision is set on that half only, and the verdict says so."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

pytestmark = [pytest.mark.slow]


def test_the_bucket_half_sets_the_click_decision_through_the_asset_graph(prepared_copy) -> None:
    from dagster import AssetKey

    from ops.data.random_exposure import calibration_rows, calibration_users
    from ops.simulation.brains.embedded import EmbeddedBrainModel
    from ops.storage.atomic import atomic_write_parquet
    from ops.studies.alignment.calibration import list_response_status
    from pipelines.definitions import build_definitions
    from resources.storage import SimabIOManager

    home, instance, _ = prepared_copy
    # The shared world's bucket (30 % of 150 users) is too small for a half with 20 clicks:
    # this copy's bucket shows every user 10 random items, clicked by the planted P(click).
    path = home / "assets" / "ground_truth.parquet"
    planted = pl.read_parquet(path).filter(pl.col("judge") == "planted")
    rated = pl.read_parquet(home / "assets" / "ratings.parquet").select("user_id", "item_id")
    rng = np.random.default_rng(0)
    # As a production bucket: items the user had not taken.
    unseen = planted.join(rated, on=["user_id", "item_id"], how="anti")
    shown = (
        unseen.group_by("user_id", maintain_order=True).agg(pl.all().sample(10, seed=0)).explode(pl.exclude("user_id"))
    )
    bucket = shown.with_columns(
        judge=pl.lit("random_exposure"),
        clicked=pl.Series((rng.random(shown.height) < shown.get_column("clicked").to_numpy()).astype(float)),
        liked=pl.Series((rng.random(shown.height) < shown.get_column("liked").to_numpy()).astype(float)),
    )
    truth = pl.concat([planted, bucket.select(planted.columns)])
    atomic_write_parquet(truth, path, checksum=True)
    held = calibration_users(truth)
    assert len(held) == 75
    defs = build_definitions(environ={"SIMAB_HOME": str(home), "SIMAB_CLICK_CALIBRATION": "random_exposure"})
    result = defs.resolve_job_def("simab_prepare").execute_in_process(
        instance=instance, asset_selection=[AssetKey("agents"), AssetKey("embedded_brain")]
    )
    assert result.success
    model = SimabIOManager(root=str(home)).stored("embedded_brain")
    assert isinstance(model, EmbeddedBrainModel)
    record = model.params.exposure_calibration
    rows = calibration_rows(truth)
    # Every calibration user who can be an agent (a train history) was built, and all their rows read.
    agents = SimabIOManager(root=str(home)).stored("agents")
    readable = rows.filter(pl.col("user_id").is_in(sorted(agents.profiles)))
    assert record is not None and record.users == readable.get_column("user_id").n_unique() > 0.8 * len(held)
    assert record.rows == readable.height
    assert record.clicks == int(readable.get_column("clicked").sum()) and record.scale > 0
    assert model.params.click_scale == pytest.approx(record.scale)
    status = list_response_status(model.params)
    assert status["calibrated"] and status["on"] == "random_exposure"
