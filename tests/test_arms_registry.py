"""The Arm protocol and its registry: specs, aliases, entry-point arms, lists
files and their checks, MLflow models, the Agent4Rec plug-in, and ranking once with the
built-ins' offline metrics unchanged."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fakes.arm_packages import install_agent4rec_plugin, install_tiny_arm_package, uninstall
from fakes.planted_data import planted_movielens
from ops.arms.base import Arm, FitData, ScoresNotAvailable
from ops.arms.lists_file import ListsFileError, read_lists
from ops.arms.ranking import lists_for, metrics_from_lists, rank_once, ranking_users
from ops.arms.recommenders import TrainedArm, arm_config, evaluate_arm, top_k
from ops.arms.registry import PluggedArm, declare, forget, known_arm_names, make_arm, parse_arm_spec
from ops.data.catalogue import build_catalogue
from ops.data.split import chronological_split

FAST = dict(batch_size=256, learning_rate=0.01, max_epochs=2, patience=1)


@pytest.fixture(scope="module")
def data():
    import torch

    torch.set_num_threads(1)
    users, movies, ratings = planted_movielens(seed=7, n_users=120, n_movies=150, ratings_per_user=40)
    split = chronological_split(ratings)
    return users, build_catalogue(movies), split


def _fit(arm, data):
    users, catalogue, split = data
    arm.fit(FitData(split.train, split.valid, users, catalogue, rank_users=ranking_users(split.train, split.test)))
    return arm


def test_specs_name_an_arm_its_kind_and_its_parameters():
    assert parse_arm_spec("pop").target == "pop"
    spec = parse_arm_spec("half=deepfm;train_fraction=0.5;feature_set=user_id_only")
    assert (spec.name, spec.kind, spec.params) == (
        "half",
        "deepfm",
        {"train_fraction": 0.5, "feature_set": "user_id_only"},
    )
    assert parse_arm_spec(spec.text()) == spec
    lists = parse_arm_spec("mine=lists:/data/x;y.parquet")  # a path keeps its ';'
    assert (lists.kind, lists.source) == ("lists", "/data/x;y.parquet")
    assert parse_arm_spec("prod=mlflow:models:/prod/3").source == "models:/prod/3"
    # After a source, the `;key=value` pairs that end the spec are parameters; the long form names the source.
    short = parse_arm_spec("prod=mlflow:models:/prod/3;mode=topk;request=200")
    assert (short.source, short.params) == ("models:/prod/3", {"mode": "topk", "request": 200})
    assert parse_arm_spec(short.text()) == short
    assert make_arm(short).arm.params["mode"] == "topk"
    assert make_arm(parse_arm_spec("cand=mlflow;uri=models:/prod/3;request=200")).arm.params["request"] == 200
    assert parse_arm_spec("ours=lists:/data/x;y.parquet;fill=pop").params == {"fill": "pop"}
    for bad, why in (
        ("Bad=pop", "must be"),
        ("x/y", "must be"),
        ("a=", "nothing after"),
        ("a=deepfm;oops", "not key=value"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_arm_spec(bad)
    # A variant is a parameter of an arm; the old names stay as aliases of the same config.
    half = make_arm("deepfm_data50=deepfm;train_fraction=0.5")
    assert half.config == arm_config("deepfm_data50") == make_arm("deepfm_data50").config
    assert make_arm(parse_arm_spec("ufm=fm;feature_set=user_id_only")).config.feature_set == "user_id_only"
    assert {"random", "pop", "fm", "deepfm_data50", "deepfm_movie_id_only"} <= set(known_arm_names())
    with pytest.raises(ValueError, match="unknown arm kind 'svd'"):
        make_arm(parse_arm_spec("x=svd"))
    with pytest.raises(ValueError, match="unknown arm 'svd'"):
        declare("svd")


def test_rank_once_gives_the_built_ins_offline_metrics_and_lists_unchanged(data):
    users, catalogue, split = data
    items = catalogue.get_column("item_id").to_numpy()
    for name in ("random", "pop", "fm"):
        arm = _fit(make_arm(name, **FAST), data)
        assert isinstance(arm, TrainedArm) and isinstance(arm, Arm)
        ranking = rank_once(arm, split.train, split.test, items)
        assert set(ranking.get_column("user_id").unique()) == set(ranking_users(split.train, split.test).tolist())
        once = metrics_from_lists(arm, ranking, split.test)
        before = evaluate_arm(arm, split.train, split.test, items)  # ranks the relevant users on their own
        for field in ("recall_at_k", "ndcg_at_k", "test_auc"):
            assert getattr(once, field) == pytest.approx(getattr(before, field), abs=1e-12), (name, field)
        assert once.test_log_loss == before.test_log_loss and once.users_ranked == before.users_ranked
        train_users = split.train.get_column("user_id").unique().to_numpy()
        lists = lists_for(ranking, train_users)
        direct = top_k(arm, train_users, items, exclude=split.train.select("user_id", "item_id"))
        assert lists.select("user_id", "rank", "item_id").equals(direct.select("user_id", "rank", "item_id"))
        assert np.allclose(lists.get_column("score").to_numpy(), direct.get_column("score").to_numpy(), atol=1e-12)
    assert once.test_auc > 0.5 and once.ndcg_at_k > 0


def test_an_entry_point_arm_is_made_fitted_ranked_stored_and_refit(data, tmp_path):
    users, catalogue, split = data
    install_tiny_arm_package(tmp_path / "site")
    try:
        assert "itemmean" in known_arm_names()
        arm = make_arm("itemmean", seed=3, max_epochs=9)  # the constructor takes seed, not max_epochs
        assert isinstance(arm, PluggedArm) and arm.params == {"shrinkage": 5.0, "seed": 3}
        _fit(arm, data)
        ranking = rank_once(arm, split.train, split.test, catalogue.get_column("item_id").to_numpy())
        assert ranking.group_by("user_id").len().get_column("len").min() == 20
        assert ranking.join(split.train, on=["user_id", "item_id"], how="semi").height == 0  # never a train item
        metrics = metrics_from_lists(arm, ranking, split.test)
        assert metrics.test_auc is not None and metrics.test_log_loss is None
        arm.save(tmp_path / "stored")
        again = PluggedArm.load(tmp_path / "stored")
        pairs = split.test.select("user_id", "item_id")
        assert np.array_equal(
            again.score(pairs["user_id"].to_numpy(), pairs["item_id"].to_numpy()),
            arm.score(pairs["user_id"].to_numpy(), pairs["item_id"].to_numpy()),
        )
        assert (
            again.describe()["arm_class"] == "tiny_simab_arm.ItemMeanArm" and again.describe()["arm_spec"] == "itemmean"
        )
        bigger = pl.concat([split.train, split.valid])
        refit = arm.refit(FitData(bigger, split.valid, users, catalogue))
        assert refit is not arm and refit.can_refit and not np.array_equal(refit.arm.means, arm.arm.means)
    finally:
        uninstall(tmp_path / "site")
    assert "itemmean" not in known_arm_names()


def _good_lists(data, n: int = 25, scores: bool = True) -> pl.DataFrame:
    """Every train and test user's `n` best Pop items that are not its train items."""
    users, catalogue, split = data
    pop = _fit(make_arm("pop"), data)
    ranking = pop.rank(
        ranking_users(split.train, split.test),
        catalogue.get_column("item_id").to_numpy(),
        split.train.select("user_id", "item_id"),
        n,
    )
    assert "item_id" in ranking.columns  # an arm's ranking says item_id, as a lists file does
    frame = ranking.select("user_id", "rank", "item_id", "score")
    return frame if scores else frame.drop("score")


def _read(path, data):
    users, catalogue, split = data
    return read_lists(
        path,
        users.get_column("user_id").to_numpy(),
        catalogue.get_column("item_id").to_numpy(),
        ranking_users(split.train, split.test),
        split.train,  # the lists arm reads FitData's train window
    )


def test_a_lists_file_ranks_as_written_and_gives_auc_only_with_scores(data, tmp_path):
    users, catalogue, split = data
    good = _good_lists(data)
    good.write_parquet(tmp_path / "lists.parquet")
    lists, has_scores = _read(tmp_path / "lists.parquet", data)
    assert has_scores and lists.height == good.height
    arm = _fit(make_arm(parse_arm_spec(f"ours=lists:{tmp_path / 'lists.parquet'}")), data)
    assert not arm.can_refit
    ranking = rank_once(arm, split.train, split.test, catalogue.get_column("item_id").to_numpy())
    pop = _fit(make_arm("pop"), data)
    pop_metrics = metrics_from_lists(
        pop, rank_once(pop, split.train, split.test, catalogue.get_column("item_id").to_numpy()), split.test
    )
    ours = metrics_from_lists(arm, ranking, split.test)
    assert ours.recall_at_k == pytest.approx(pop_metrics.recall_at_k) and ours.ndcg_at_k == pytest.approx(
        pop_metrics.ndcg_at_k
    )
    assert ours.test_auc is not None and 0.4 < ours.test_auc < 1
    # CSV without scores: same lists, AUC not available.
    _good_lists(data, scores=False).write_csv(tmp_path / "lists.csv")
    bare = _fit(make_arm(parse_arm_spec(f"bare=lists:{tmp_path / 'lists.csv'}")), data)
    with pytest.raises(ScoresNotAvailable):
        bare.score(np.array([1]), np.array([1]))
    metrics = metrics_from_lists(
        bare, rank_once(bare, split.train, split.test, catalogue.get_column("item_id").to_numpy()), split.test
    )
    assert metrics.test_auc is None and metrics.recall_at_k == pytest.approx(ours.recall_at_k)


def _malformed(data, kind: str) -> tuple[pl.DataFrame, str, str, str]:
    """A lists file broken one way: (frame, format, the row named, the field named)."""
    users, catalogue, split = data
    good = _good_lists(data)
    if kind == "unknown user":
        return (
            good.with_columns(
                pl.when(pl.int_range(pl.len()) == 7).then(999_999).otherwise(pl.col("user_id")).alias("user_id")
            ),
            "parquet",
            "row 8",
            "user_id",
        )
    if kind == "unknown item":
        return (
            good.with_columns(
                pl.when(pl.int_range(pl.len()) == 3).then(888_888).otherwise(pl.col("item_id")).alias("item_id")
            ),
            "parquet",
            "row 4",
            "item_id",
        )
    if kind == "duplicate item":
        second = good.row(1, named=True)
        return (
            good.with_columns(
                pl.when(pl.int_range(pl.len()) == 2)
                .then(second["item_id"])
                .otherwise(pl.col("item_id"))
                .alias("item_id")
            ),
            "parquet",
            "row 3",
            "item_id",
        )
    if kind == "duplicate rank":
        return (
            good.with_columns(pl.when(pl.int_range(pl.len()) == 5).then(1).otherwise(pl.col("rank")).alias("rank")),
            "parquet",
            "row 6",
            "rank",
        )
    if kind == "too few":
        first_user = good.get_column("user_id")[0]
        return good.filter((pl.col("user_id") != first_user) | (pl.col("rank") <= 19)), "parquet", "row 1", "item_id"
    if kind == "user missing":
        last = good.get_column("user_id").max()
        return good.filter(pl.col("user_id") != last), "parquet", "no row", "user_id"
    if kind == "bad type":
        text = good.with_columns(pl.col("rank").cast(pl.Utf8))
        return (
            text.with_columns(
                pl.when(pl.int_range(pl.len()) == 10).then(pl.lit("first")).otherwise(pl.col("rank")).alias("rank")
            ),
            "csv",
            "row 11 (line 12)",
            "rank",
        )
    if kind == "missing column":
        return good.drop("item_id"), "csv", "header", "item_id"
    raise AssertionError(kind)


MALFORMED = (
    "unknown user",
    "unknown item",
    "duplicate item",
    "duplicate rank",
    "too few",
    "user missing",
    "bad type",
    "missing column",
)


@pytest.mark.parametrize("kind", MALFORMED)
def test_each_malformed_lists_file_gets_one_line_naming_file_row_and_field(data, tmp_path, kind):
    frame, fmt, row, field = _malformed(data, kind)
    path = tmp_path / f"broken.{fmt}"
    frame.write_parquet(path) if fmt == "parquet" else frame.write_csv(path)
    with pytest.raises(ListsFileError) as caught:
        _read(path, data)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: {row}: field {field!r}: "), message
    assert (caught.value.row, caught.value.field) == (row, field)


def test_the_agent4rec_plugin_arms_fit_rank_store_and_refit(data, tmp_path):
    users, catalogue, split = data
    items = catalogue.get_column("item_id").to_numpy()
    for library in ("cornac", "torch_geometric"):
        pytest.importorskip(
            library, reason=f"the Agent4Rec plug-in's {library} is not installed (plugins/simab-agent4rec)"
        )
    install_agent4rec_plugin(tmp_path / "site")
    try:
        import simab_agent4rec  # noqa: F401 - importable only now

        pop = metrics_from_lists(
            _fit(make_arm("pop"), data),
            rank_once(_fit(make_arm("pop"), data), split.train, split.test, items),
            split.test,
        )
        small = {
            "mf": "mf=mf;k=16;max_iter=30",
            "multvae": "multvae=multvae;k=16;hidden=32;n_epochs=20",
            "lightgcn": "lightgcn=lightgcn;embedding_dim=16;num_layers=2;n_epochs=3;learning_rate=0.01",
        }
        for name, text in small.items():
            arm = _fit(make_arm(parse_arm_spec(text), seed=5), data)
            assert arm.can_refit and arm.describe()["seed"] == 5
            ranking = rank_once(arm, split.train, split.test, items)
            assert ranking.group_by("user_id").len().get_column("len").min() == 20
            metrics = metrics_from_lists(arm, ranking, split.test)
            # Planted tastes: each learns more than nothing (Random's NDCG is ~ a third of Pop's).
            assert metrics.ndcg_at_k > 0.5 * pop.ndcg_at_k and metrics.test_auc > 0.45, (name, metrics)
            if name == "multvae":  # the same seed, the same model, whatever order a frame comes in
                twin = _fit(make_arm(parse_arm_spec(text), seed=5), data)
                assert rank_once(twin, split.train, split.test, items).equals(ranking)
            arm.save(tmp_path / name)
            again = PluggedArm.load(tmp_path / name)
            assert rank_once(again, split.train, split.test, items).equals(ranking)
    finally:
        uninstall(tmp_path / "site")


def test_an_mlflow_model_scores_or_returns_top_k_and_records_its_version(data, tmp_path, monkeypatch):
    import mlflow

    users, catalogue, split = data
    items = catalogue.get_column("item_id").to_numpy()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    from fakes.mlflow_models import log_popularity_models

    log_popularity_models(split.train, tmp_path, name="team-pop")
    scored = _fit(make_arm(parse_arm_spec("prod=mlflow:models:/team-pop-score/1")), data)
    described = scored.describe()
    assert described["mlflow_model_version"] == "1" and described["mlflow_registered_model"] == "team-pop-score"
    assert described["mlflow_mode"] == "score" and described["uri"] == "models:/team-pop-score/1"
    pop = _fit(make_arm("pop"), data)
    ranking = rank_once(scored, split.train, split.test, items)
    expected = rank_once(pop, split.train, split.test, items)
    assert ranking.select("user_id", "rank", "item_id").equals(expected.select("user_id", "rank", "item_id"))
    assert metrics_from_lists(scored, ranking, split.test).test_auc == pytest.approx(
        metrics_from_lists(pop, expected, split.test).test_auc
    )
    # A model that returns its own top-k: checked as a lists file, no AUC.
    listing = _fit(make_arm(parse_arm_spec("cand=mlflow:models:/team-pop-topk@champion")), data)
    assert listing.describe()["mlflow_mode"] == "topk" and listing.describe()["mlflow_model_version"] == "1"
    top = rank_once(listing, split.train, split.test, items)
    assert top.select("user_id", "rank", "item_id").equals(expected.select("user_id", "rank", "item_id"))
    assert metrics_from_lists(listing, top, split.test).test_auc is None
    # Stored and loaded, it scores from its own copy of the model.
    scored.save(tmp_path / "stored")
    again = PluggedArm.load(tmp_path / "stored")
    assert again.describe()["mlflow_model_version"] == "1"
    assert np.array_equal(again.score(np.array([1, 2]), items[:2]), scored.score(np.array([1, 2]), items[:2]))
    forget("prod")


def test_a_short_list_is_refused_naming_the_fills_filled_from_popularity_or_simulated_as_it_is(data, tmp_path):
    users, catalogue, split = data
    good = _good_lists(data)  # 25 of Pop's order per user
    ranked = good.get_column("user_id").unique().sort().to_list()
    thin, empty = ranked[:3], ranked[3]
    short = good.filter(~pl.col("user_id").is_in(thin) | (pl.col("rank") <= 9))
    short.write_parquet(tmp_path / "short.parquet")
    with pytest.raises(ListsFileError, match=r"fewer than 20 \(3 user\(s\) short\); .*`;fill=pop`.*`;fill=none`"):
        _fit(make_arm(parse_arm_spec(f"short=lists:{tmp_path / 'short.parquet'}")), data)
    items = catalogue.get_column("item_id").to_numpy()
    pop = _fit(make_arm("pop"), data)
    pop_top = rank_once(pop, split.train, split.test, items)

    # fill=pop: each short list goes on in Pop's order, so here it becomes Pop's own list.
    filled = _fit(make_arm(parse_arm_spec(f"filled=lists:{tmp_path / 'short.parquet'};fill=pop")), data)
    ranking = rank_once(filled, split.train, split.test, items)
    for user in thin:
        mine = ranking.filter(pl.col("user_id") == user).sort("rank").get_column("item_id").to_list()
        assert mine == pop_top.filter(pl.col("user_id") == user).sort("rank").get_column("item_id").to_list()
        assert len(mine) == 20
    assert filled.describe()["short_users"] == 3 and filled.describe()["filled_items"] == 3 * 11
    scored = filled.lists.filter(pl.col("user_id") == thin[0]).sort("rank").get_column("score")
    assert scored.head(9).is_not_null().all() and scored.tail(11).is_null().all()  # filled: no score of the team's
    assert 0.4 < metrics_from_lists(filled, ranking, split.test).test_auc < 1

    # fill=none: the short lists stay short, and are measured as they are.
    as_is = _fit(make_arm(parse_arm_spec(f"as_is=lists:{tmp_path / 'short.parquet'};fill=none")), data)
    ranking = rank_once(as_is, split.train, split.test, items)
    lengths = dict(ranking.group_by("user_id").len().iter_rows())
    assert {lengths[u] for u in thin} == {9} and lengths[ranked[-1]] == 20
    metrics = metrics_from_lists(as_is, ranking, split.test)
    assert 0 <= metrics.recall_at_k <= metrics_from_lists(pop, pop_top, split.test).recall_at_k

    # A list left with nothing: filled whole from popularity; as it is, refused (no home page to show).
    seen = split.train.filter(pl.col("user_id") == empty).get_column("item_id").head(5).to_list()
    nothing = pl.concat(
        [
            short.filter(pl.col("user_id") != empty).drop("score"),
            pl.DataFrame({"user_id": [empty] * len(seen), "rank": list(range(1, len(seen) + 1)), "item_id": seen}),
        ]
    ).with_columns(pl.col("user_id", "rank", "item_id").cast(pl.Int64))
    nothing.write_parquet(tmp_path / "nothing.parquet")
    with pytest.raises(
        ListsFileError, match=rf"user {empty} has 0 items once its 5 train item\(s\) are removed.*fill=pop"
    ):
        _fit(make_arm(parse_arm_spec(f"none0=lists:{tmp_path / 'nothing.parquet'};fill=none")), data)
    whole = _fit(make_arm(parse_arm_spec(f"pop0=lists:{tmp_path / 'nothing.parquet'};fill=pop")), data)
    assert whole.lists.filter(pl.col("user_id") == empty).height == 20

    # A user the file leaves out (a cold user a model has nothing for): refused naming fill=pop,
    # which gives it Pop's list whole.
    short.filter(pl.col("user_id") != empty).write_parquet(tmp_path / "cold.parquet")
    with pytest.raises(ListsFileError, match=rf"user {empty} has no list \(1 of .*`;fill=pop`"):
        _fit(make_arm(parse_arm_spec(f"cold=lists:{tmp_path / 'cold.parquet'};fill=none")), data)
    cold = _fit(make_arm(parse_arm_spec(f"cold_pop=lists:{tmp_path / 'cold.parquet'};fill=pop")), data)
    ranking = rank_once(cold, split.train, split.test, items)
    mine = ranking.filter(pl.col("user_id") == empty).sort("rank").get_column("item_id").to_list()
    assert mine == pop_top.filter(pl.col("user_id") == empty).sort("rank").get_column("item_id").to_list()
    assert len(mine) == 20 and cold.describe()["short_users"] == 4
    with pytest.raises(ValueError, match="fill='zeros': one of pop, none"):
        make_arm(parse_arm_spec(f"z=lists:{tmp_path / 'short.parquet'};fill=zeros"))
