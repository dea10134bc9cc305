"""Jobs and schedules of the lifecycle."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job

# The whole lifecycle in dependency order (unpartitioned assets plus every arm partition).
lifecycle_job = define_asset_job(
    "simab_lifecycle",
    selection=AssetSelection.all(),
    description="MovieLens → contracts → split → arms → agents → simulation → read-out",
)

JOBS = [lifecycle_job]
SCHEDULES: list = []
