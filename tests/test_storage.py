"""The IO manager stores every asset value without pickle, reads it back exactly, refuses
what it cannot store and never unpickles; a write that dies leaves the previous value."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from dagster import PartitionKeyRange, build_input_context, build_output_context

from fakes.agents import HashTextEmbedder, make_catalogue, make_users_and_ratings, split_by_time
from ops.storage.codec import CodecError, load_arrays, save_arrays
from resources.storage import SimabIOManager, StoredDataError, StoredValueError
from tests.storage_checks import Touch, assert_same, contains_pickle


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A small catalogue, its agents, the fitted embedded brain, three arms and a read-out
    of two simulated arms: every kind of value the asset graph stores."""
    import torch

    from ops.agents.build import AgentsConfig, build_agents
    from ops.agents.embeddings import EmbeddingConfig, PaletteLayoutPosterEmbedder
    from ops.arms.recommenders import arm_config, top_k, train_arm
    from ops.data.catalogue import build_catalogue
    from ops.readout.ab_readout import ab_readout
    from ops.readout.readout_config import ReadoutConfig
    from ops.simulation.brains.embedded import fit_embedded_brain
    from ops.simulation.catalogue import Catalogue
    from ops.simulation.runner import simulate

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("values")
    movies, meta = make_catalogue(root / "posters", n_per_genre=10)
    users, ratings, _ = make_users_and_ratings(movies, n_users=16, per_user=12)
    train, valid = split_by_time(ratings)
    catalogue = build_catalogue(movies, meta)
    agents = build_agents(
        train,
        users,
        catalogue,
        AgentsConfig(embedding=EmbeddingConfig(show_progress=False)),
        HashTextEmbedder(),
        PaletteLayoutPosterEmbedder(),
        root / "cache",
    )
    brain = fit_embedded_brain(agents, train, valid, users)
    arms = {
        name: train_arm(
            arm_config(name, settings={"max_epochs": 1, "embedding_dim": 4}), train, valid, users, catalogue
        )
        for name in ("random", "pop", "fm")
    }
    user_ids = train.get_column("user_id").unique().sort().to_numpy()
    events = []
    for name in ("random", "pop"):
        lists = top_k(
            arms[name],
            user_ids,
            catalogue.get_column("item_id").to_numpy(),
            exclude=train.select("user_id", "item_id"),
            k=20,
        )
        events.append(
            simulate(brain.brain(), agents.sessions(), lists, Catalogue.from_frame(catalogue), arms=[name], seed=1)
        )
    readout = ab_readout(pl.concat(events), control="pop", config=ReadoutConfig(n_bootstrap=50))
    return SimpleNamespace(agents=agents, brain=brain, arms=arms, readout=readout, train=train, catalogue=catalogue)


def store(manager, asset, value, partition=None):
    manager.handle_output(build_output_context(asset_key=[asset], partition_key=partition), value)


def fetch(manager, asset, partition=None):
    return manager.load_input(build_input_context(asset_key=[asset], partition_key=partition))


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


# ---------------------------------------------------------------------------------------
# every value round-trips exactly, and nothing on disk is a pickle
# ---------------------------------------------------------------------------------------


def test_agents_round_trip_exactly(world, tmp_path):
    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "agents", world.agents)
    again = fetch(manager, "agents")
    assert_same(again, world.agents)
    # Memories still share the one catalogue matrix rather than each holding a copy.
    assert all(m.vectors is again.vectors for m in again.memories.values())
    assert [s.user_id for s in again.sessions()] == [s.user_id for s in world.agents.sessions()]


def test_embedded_brain_round_trips_and_decides_the_same(world, tmp_path):
    from ops.simulation.catalogue import Catalogue
    from ops.simulation.runner import simulate

    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "embedded_brain", world.brain)
    again = fetch(manager, "embedded_brain")
    assert_same(again, world.brain)
    lists = pl.DataFrame(
        {
            "arm": "x",
            "user_id": np.repeat([1, 2], 20),
            "rank": np.tile(np.arange(1, 21), 2),
            "item_id": np.tile(world.catalogue.get_column("item_id").to_numpy()[:20], 2),
            "score": 0.0,
        }
    )
    catalogue = Catalogue.from_frame(world.catalogue)
    sessions = world.agents.sessions([1, 2])
    before = simulate(world.brain.brain(), sessions, lists, catalogue, arms=["x"], seed=3)
    after = simulate(again.brain(), sessions, lists, catalogue, arms=["x"], seed=3)
    assert before.drop("latency_s").equals(after.drop("latency_s"))


@pytest.mark.parametrize("name", ["random", "pop", "fm"])
def test_trained_arms_round_trip_exactly(world, tmp_path, name):
    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "recommender_arm", world.arms[name], partition=name)
    again = fetch(manager, "recommender_arm", partition=name)
    assert_same(again, world.arms[name])
    u = world.train.get_column("user_id").to_numpy()
    m = world.train.get_column("item_id").to_numpy()
    assert np.array_equal(again.score(u, m), world.arms[name].score(u, m))


def test_readout_and_plain_values_round_trip_exactly(world, tmp_path):
    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "ab_readout", world.readout)
    assert_same(fetch(manager, "ab_readout"), world.readout)
    value = {"path": "/tmp/report.md", "n": 3, "share": 0.1 + 0.2, "flags": [True, None]}
    store(manager, "simab_report", value)
    assert_same(fetch(manager, "simab_report"), value)


def test_nothing_stored_is_a_pickle(world, tmp_path):
    manager = SimabIOManager(root=str(tmp_path))
    for asset, value in [
        ("agents", world.agents),
        ("embedded_brain", world.brain),
        ("ab_readout", world.readout),
        ("report", "x"),
    ]:
        store(manager, asset, value)
    for name, arm in world.arms.items():
        store(manager, "recommender_arm", arm, partition=name)
    store(manager, "users", pl.DataFrame({"user_id": [1]}))
    stored = files_under(tmp_path)
    assert {p.suffix for p in stored} == {".json", ".parquet", ".npz", ".safetensors", ".sha256"}
    assert not [p for p in stored if contains_pickle(p)]


def test_the_pickle_detector_sees_pickles(tmp_path):
    import torch

    (tmp_path / "a.pkl").write_bytes(pickle.dumps({"a": 1}))
    torch.save({"w": torch.zeros(2)}, tmp_path / "w.pt")
    np.savez(tmp_path / "o.npz", looks=np.array(["warm", None], dtype=object))
    np.savez(tmp_path / "plain.npz", x=np.arange(3))
    assert [p.name for p in files_under(tmp_path) if contains_pickle(p)] == ["a.pkl", "o.npz", "w.pt"]


# ---------------------------------------------------------------------------------------
# what cannot be stored or read is refused, by name
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, type_name",
    [
        ({1: "a"}, "builtins.dict"),  # int keys would come back as str
        ((1, 2), "builtins.tuple"),
        (float("nan"), "builtins.float"),
        (np.arange(3), "numpy.ndarray"),
        (SimpleNamespace(a=1), "types.SimpleNamespace"),
    ],
    ids=["int_keys", "tuple", "nan", "ndarray", "object"],
)
def test_a_value_without_an_exact_format_is_refused_naming_asset_and_type(tmp_path, value, type_name):
    manager = SimabIOManager(root=str(tmp_path))
    with pytest.raises(
        StoredValueError, match=rf"asset mystery: cannot store a value of type {type_name}\b.*never pickle"
    ):
        store(manager, "mystery", value)
    assert not files_under(tmp_path)


def test_a_pickle_in_the_asset_folder_is_refused_and_never_loaded(tmp_path):
    marker = tmp_path / "unpickled"
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "agents.pkl").write_bytes(pickle.dumps(Touch(str(marker))))
    (assets / "simulation_events").mkdir()
    (assets / "simulation_events" / "pop.pkl").write_bytes(pickle.dumps(Touch(str(marker))))
    manager = SimabIOManager(root=str(tmp_path))
    with pytest.raises(
        StoredValueError, match=r"asset agents: .*agents\.pkl is a pickle file\. simab never loads pickle.*delete it"
    ):
        fetch(manager, "agents")
    # Reading every arm refuses it too, rather than skipping the arm as never simulated.
    with pytest.raises(StoredValueError, match=r"pop\.pkl is a pickle file"):
        manager.load_input(
            build_input_context(
                asset_key=["simulation_events"],
                asset_partitions_def=_arms("fm", "pop"),
                asset_partition_key_range=PartitionKeyRange("fm", "pop"),
            )
        )
    assert not marker.exists()
    # Materialising the asset again replaces the old pickle.
    store(manager, "agents", "a value")
    assert fetch(manager, "agents") == "a value" and not (assets / "agents.pkl").exists()


def test_a_pointer_naming_an_unknown_type_is_refused(tmp_path):
    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "agents", "x")
    pointer = tmp_path / "assets" / "agents.json"
    # Hand-written, as a pointer of before checksums (none beside it): read, and its type refused.
    (tmp_path / "assets" / "agents.json.sha256").unlink()
    pointer.write_text(json.dumps({**json.loads(pointer.read_text()), "type": "os.system", "folder": "agents.x.d"}))
    with pytest.raises(StoredValueError, match="names type 'os.system', which simab does not load"):
        fetch(manager, "agents")
    pointer.write_text("{half")
    damaged = r"asset agents: stored value at \S*agents\.json is damaged \(JSONDecodeError.*materialise it again"
    with pytest.raises(StoredDataError, match=damaged):
        fetch(manager, "agents")


def test_a_nan_that_json_cannot_hold_is_refused_naming_the_file(world, tmp_path):
    import dataclasses

    from ops.readout.readout_config import ReadoutConfig

    odd = dataclasses.replace(world.readout, config=ReadoutConfig(confidence=float("nan")))
    with pytest.raises(CodecError, match=r"readout\.json: cannot be written as JSON: Out of range float"):
        odd.save(tmp_path / "readout")


def test_codec_refuses_object_arrays(tmp_path):
    with pytest.raises(CodecError, match=r"array 'looks' holds Python objects"):
        save_arrays(tmp_path / "a.npz", {"looks": np.array(["warm", None], dtype=object)})
    # Written behind its back, numpy refuses to unpickle it and the error names the file.
    np.savez(tmp_path / "b.npz", looks=np.array(["warm", None], dtype=object))
    with pytest.raises(CodecError, match=r"b\.npz"):
        load_arrays(tmp_path / "b.npz")


# ---------------------------------------------------------------------------------------
# a write that dies leaves the previous complete value
# ---------------------------------------------------------------------------------------


def test_a_failed_folder_write_leaves_the_previous_value(world, tmp_path, monkeypatch):
    from ops.agents.build import Agents

    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "agents", world.agents)
    before = {p: p.read_bytes() for p in files_under(tmp_path)}

    def dies_half_way(self, folder):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "agents.json").write_text("{half")
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(Agents, "save", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        store(manager, "agents", world.agents)
    assert {p: p.read_bytes() for p in files_under(tmp_path)} == before
    assert_same(fetch(manager, "agents"), world.agents)


def test_a_kill_between_folder_and_pointer_leaves_the_previous_value(world, tmp_path, monkeypatch):
    import ops.storage.atomic

    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "ab_readout", world.readout)
    pointer = tmp_path / "assets" / "ab_readout.json"
    before = pointer.read_bytes()
    real = ops.storage.atomic.atomic_write_bytes

    def killed_at_the_pointer(path, data, clean_stale=False, checksum=False):
        if Path(path) == pointer:
            raise KeyboardInterrupt("killed")
        real(path, data, clean_stale, checksum)

    monkeypatch.setattr(ops.storage.atomic, "atomic_write_bytes", killed_at_the_pointer)
    with pytest.raises(KeyboardInterrupt):
        store(manager, "ab_readout", world.readout)
    monkeypatch.undo()
    assert pointer.read_bytes() == before
    assert_same(fetch(manager, "ab_readout"), world.readout)
    # What a kill -9 would have left (an orphan folder, a staging folder) goes with the next write.
    (tmp_path / "assets" / "ab_readout.0123abcd.d").mkdir()
    (tmp_path / "assets" / ".ab_readout.x.tmp").mkdir()
    store(manager, "ab_readout", world.readout)
    assert len(list((tmp_path / "assets").glob("*ab_readout*"))) == 3  # the pointer, its checksum and its folder


def test_a_value_replaced_by_a_frame_leaves_no_folder(world, tmp_path):
    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "thing", world.readout)
    store(manager, "thing", pl.DataFrame({"a": [1]}))
    assert sorted(p.name for p in (tmp_path / "assets").iterdir()) == ["thing.parquet", "thing.parquet.sha256"]
    assert fetch(manager, "thing").equals(pl.DataFrame({"a": [1]}))


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def _arms(*keys):
    from dagster import StaticPartitionsDefinition

    return StaticPartitionsDefinition(list(keys))


def test_alignment_results_round_trip_without_pickle(tmp_path):
    from ops.storage.codec import CodecError
    from ops.studies.alignment.rating import RatingAlignment
    from ops.studies.alignment.taste import TasteDiscrimination

    frame = pl.DataFrame({"ratio": ["1:1", "1:9"], "metric": ["f1", "f1"], "mean": [0.61, None]})
    taste = TasteDiscrimination(per_agent=frame, summary=frame.head(1), brain="embedded")
    taste.save(tmp_path / "taste")
    back = TasteDiscrimination.load(tmp_path / "taste")
    assert back.brain == "embedded" and back.per_agent.equals(frame) and back.summary.equals(frame.head(1))
    rating = RatingAlignment(
        pairs=frame, prediction=frame.tail(1), distribution=frame, wasserstein=None, unanswered=3, brain="llm:x"
    )
    rating.save(tmp_path / "rating")
    back = RatingAlignment.load(tmp_path / "rating")
    assert (back.wasserstein, back.unanswered, back.brain) == (None, 3, "llm:x") and back.prediction.equals(
        frame.tail(1)
    )
    assert not list(tmp_path.rglob("*.pkl"))
    # One type's folder is not read as another's.
    with pytest.raises(CodecError, match="TasteDiscrimination.*expected 'RatingAlignment'"):
        RatingAlignment.load(tmp_path / "taste")


# ---------------------------------------------------------------------------------------
# stored data proves itself: checksums beside every file, checked on read
# ---------------------------------------------------------------------------------------


def _events_frame(n: int = 400) -> pl.DataFrame:
    """A frame shaped like one arm's events (the columns a flip altered silently before checksums)."""
    rng = np.random.default_rng(7)
    return pl.DataFrame(
        {
            "user_id": np.repeat(np.arange(1, n // 8 + 1), 8),
            "step": np.tile(np.arange(8), n // 8),
            "action": rng.choice(["click_movie", "next_page", "exit"], n),
            "rating": rng.integers(1, 6, n),
            "item_id": rng.integers(1, 3000, n),
        }
    )


def test_every_stored_file_has_its_sha256_beside_it(world, tmp_path):
    import hashlib

    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "simulation_events", _events_frame(), partition="pop")
    store(manager, "ab_readout", world.readout)
    store(manager, "simab_report", {"path": "/tmp/r.md"})
    assets = tmp_path / "assets"
    for path in (
        assets / "simulation_events" / "pop.parquet",
        assets / "ab_readout.json",
        assets / "simab_report.json",
    ):
        digest, name = (path.parent / f"{path.name}.sha256").read_text().split()
        assert (digest, name) == (hashlib.sha256(path.read_bytes()).hexdigest(), path.name)  # `sha256sum -c` reads it
    record = json.loads((assets / "ab_readout.json").read_text())
    folder = assets / record["folder"]
    assert (
        record["sha256"]
        == {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files_under(folder)}
        and record["sha256"]
    )


def test_a_truncated_frame_raises_one_error_naming_asset_partition_path(tmp_path):
    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "simulation_events", _events_frame(), partition="pop")
    path = tmp_path / "assets" / "simulation_events" / "pop.parquet"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    expected = (
        rf"asset simulation_events, "
        rf"partition pop: stored value at {path} is damaged \(.*\); materialise it again"
    )
    with pytest.raises(StoredDataError, match=expected):
        fetch(manager, "simulation_events", partition="pop")
    # A file of before checksums (none beside it) cut in half: the same named error, not a Polars traceback.
    (path.parent / "pop.parquet.sha256").unlink()
    with pytest.raises(StoredDataError, match=expected) as raised:
        fetch(manager, "simulation_events", partition="pop")
    assert "ChecksumError" not in str(raised.value)


def test_a_file_of_before_checksums_is_read_and_gets_one_on_the_next_write(tmp_path):
    manager = SimabIOManager(root=str(tmp_path))
    frame = _events_frame()
    store(manager, "users", frame)
    sidecar = tmp_path / "assets" / "users.parquet.sha256"
    sidecar.unlink()
    assert fetch(manager, "users").equals(frame)
    store(manager, "users", frame)
    assert sidecar.is_file() and fetch(manager, "users").equals(frame)


def test_no_flipped_byte_of_a_stored_frame_reads_back_silently(tmp_path):
    """Seeded single-byte flips over a stored frame (and its checksum): each one raises the
    named error; none reads back as other data (before checksums, 11.7 % did).  A flip in the
    checksum file's name field, after the digest, may read back the identical frame."""
    manager = SimabIOManager(root=str(tmp_path))
    frame = _events_frame()
    store(manager, "simulation_events", frame, partition="pop")
    path = tmp_path / "assets" / "simulation_events" / "pop.parquet"
    sidecar = path.parent / "pop.parquet.sha256"
    originals = {path: path.read_bytes(), sidecar: sidecar.read_bytes()}
    rng = np.random.default_rng(26)
    outcomes = {(p.name, kind): 0 for p in originals for kind in ("raised", "identical")}
    # One context for every read: Dagster builds one in ~90 ms, the read itself takes under 1 ms.
    context = build_input_context(asset_key=["simulation_events"], partition_key="pop")
    for i in range(160):  # 160 flips catch what 400 did (380 of 380 before) at 2/5 of the time
        target = sidecar if i % 20 == 0 else path
        data = bytearray(originals[target])
        at = int(rng.integers(len(data)))
        data[at] ^= int(rng.integers(1, 256))
        target.write_bytes(bytes(data))
        try:
            again = manager.load_input(context)
        except StoredDataError as exc:
            assert f"{path}" in str(exc) and "partition pop" in str(exc) and "materialise it again" in str(exc)
            outcomes[target.name, "raised"] += 1
        else:
            assert again.equals(frame), f"flip of byte {at} in {target.name} read back different data silently"
            outcomes[target.name, "identical"] += 1
        target.write_bytes(originals[target])
    assert outcomes["pop.parquet", "raised"] == 152 and outcomes["pop.parquet", "identical"] == 0, outcomes


def test_a_flipped_byte_in_a_folder_value_or_a_json_value_is_named(world, tmp_path):
    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "ab_readout", world.readout)
    store(manager, "simab_report", {"path": "/tmp/report.md", "n": 3})
    assets = tmp_path / "assets"
    folder = assets / json.loads((assets / "ab_readout.json").read_text())["folder"]
    rng = np.random.default_rng(5)
    for path, asset in [
        *((p, "ab_readout") for p in files_under(folder)),
        (assets / "ab_readout.json", "ab_readout"),
        (assets / "simab_report.json", "simab_report"),
    ]:
        original = path.read_bytes()
        data = bytearray(original)
        data[int(rng.integers(len(data)))] ^= 0x20
        path.write_bytes(bytes(data))
        damaged = rf"asset {asset}: stored value at .* is damaged .*materialise it again"
        with pytest.raises(StoredDataError, match=damaged):
            fetch(manager, asset)
        path.write_bytes(original)
    assert_same(fetch(manager, "ab_readout"), world.readout)


def test_an_arm_stored_when_the_kinds_registry_was_ops_arms_catalog_still_loads(tmp_path, monkeypatch):
    from ops.arms import registry
    from ops.arms.base import ArmBase

    class Still(ArmBase):
        def __init__(self, name: str, depth: int = 1):
            super().__init__(name, depth=depth)

    monkeypatch.setitem(registry.KINDS, "still", Still)
    manager = SimabIOManager(root=str(tmp_path))
    store(manager, "recommender_arm", registry.make_arm("s=still;depth=3"), partition="s")
    (pointer,) = [p for p in (tmp_path / "assets").rglob("*.json") if '"type"' in p.read_text()]
    record = json.loads(pointer.read_text())
    assert record["type"] == "ops.arms.registry.PluggedArm"
    # Hand-written, as a pointer of before checksums (none beside it).
    Path(f"{pointer}.sha256").unlink()
    pointer.write_text(json.dumps({**record, "type": "ops.arms.catalog.PluggedArm"}))
    again = fetch(manager, "recommender_arm", partition="s")
    assert isinstance(again, registry.PluggedArm) and again.params == {"depth": 3}


def test_a_stored_table_shows_its_row_count_and_columns_in_the_catalogue(tmp_path):
    """Every frame an asset returns is materialised with `dagster/row_count` and `dagster/column_schema`."""
    from dagster import DagsterInstance, TableSchema, asset, materialize

    @asset
    def little_table() -> pl.DataFrame:
        return pl.DataFrame({"user_id": [1, 2, 3], "score": [0.5, 0.25, 1.0], "title": ["a", "b", "c"]})

    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [little_table], resources={"io_manager": SimabIOManager(root=str(tmp_path))}, instance=instance
        )
        (event,) = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert metadata["dagster/row_count"].value == 3
    schema = metadata["dagster/column_schema"].value
    assert isinstance(schema, TableSchema)
    assert [(c.name, c.type) for c in schema.columns] == [
        ("user_id", "Int64"),
        ("score", "Float64"),
        ("title", "String"),
    ]


def test_an_older_homes_catalogue_reads_back_under_its_new_name(tmp_path):
    """The catalogue asset was `mm_ml_1m`, its item column `movie_id`: a home written then
    (no checksums yet) still reads, under the new name and the new column."""
    io = SimabIOManager(root=str(tmp_path))
    assert not io.has_stored("catalogue")
    (tmp_path / "assets").mkdir()
    pl.DataFrame({"movie_id": [3, 5], "title": ["a", "b"]}).write_parquet(tmp_path / "assets" / "mm_ml_1m.parquet")
    assert io.has_stored("catalogue")
    assert io.stored("catalogue").columns == ["item_id", "title"]
    # Once the catalogue is written under its name, that one is read.
    pl.DataFrame({"item_id": [7], "title": ["c"]}).write_parquet(tmp_path / "assets" / "catalogue.parquet")
    assert io.stored("catalogue").get_column("item_id").to_list() == [7]
