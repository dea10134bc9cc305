"""Each default of a setting is written once: in `ops.settings` (`config_default`), read by
the asset configs it fills and shown in docs/settings.md's table; where a setting's help states a
default that lives elsewhere (an arm's epochs, a resource field, a computed sample size), the
statement is checked against it here."""

from __future__ import annotations

import re

import pytest

from ops.settings import _extra, config_default, declared
from pipelines.setting_ops import SETTING_OPS
from pipelines.settings_page import markdown_table

# Settings whose op config fields default to a value that means "decided elsewhere", each
# with where the help's stated default lives (checked below).
ELSEWHERE = {
    "arms": "assets.partitions.DEFAULT_ARMS (Table 2's own list when its config is empty)",
    "max_epochs": "0 = the DeepCTR arm's DeepCTRConfig.max_epochs (Appendix B: 20)",
    "validation_negatives": "0 = the domain's default (1 for implicit feedback)",
    "alignment_agents": "None = as many as ops.studies.alignment.sizing says for the half-width",
}
NOT_SET = ("", [], None)  # an op config field that a setting fills only when it is given


@pytest.fixture(scope="module")
def config_classes():
    """op name -> the Config class its function takes."""
    from pipelines.definitions import build_definitions
    from pipelines.preflight import config_class_of

    defs = build_definitions(environ={})
    nodes = [a.node_def for a in [*defs.assets, *(defs.asset_checks or [])] if getattr(a, "node_def", None)]
    return {node.name: cls for node in nodes if (cls := config_class_of(node)) is not None}


def _targets(name: str) -> list[tuple[str, str]]:
    return [tuple(t.split(".")) for t in SETTING_OPS.get(name, ())]


def test_every_op_setting_names_its_default_once(config_classes):
    assert set(SETTING_OPS) <= set(declared()), set(SETTING_OPS) - set(
        declared()
    )  # no op fed by a setting not declared
    for name, info in declared().items():
        for op, field in _targets(name):
            assert op in config_classes, f"{name}: op {op} has no Config class"
            default = config_classes[op].model_fields[field].default
            if "config_default" in _extra(info):
                assert default == config_default(name), (
                    f"{op}.{field} defaults to {default!r}, {_extra(info)['env']} says {config_default(name)!r}: "
                    f"use config_default({name!r})"
                )
            else:
                assert default in NOT_SET or name in ELSEWHERE, (
                    f"{op}.{field} defaults to {default!r}: declare config_default on {_extra(info)['env']} "
                    "and read it there"
                )


def test_the_table_shows_the_config_defaults():
    rows = {line.split(" | ")[0].strip("|` "): line.split(" | ")[2] for line in markdown_table().splitlines()[2:]}
    assert rows["SIMAB_SESSIONS"] == "`1`"
    assert rows["SIMAB_TRUST_PROTOCOLS"] == "`true`"
    assert rows["SIMAB_VISITS"] == "`1,2,3`"
    assert rows["SIMAB_TRUST_HALF_WIDTH"] == "`0.1`"
    for info in declared().values():
        if "config_default" in _extra(info):
            # The help says what the value means, not the default again.
            assert "(default" not in info.description, f"{_extra(info)['env']}: the default is config_default"


def _stated(name: str) -> str:
    match = re.search(r"\(default:? ([^)]*)\)", declared()[name].description)
    assert match, f"{name}: the help states no default"
    return match.group(1)


def test_defaults_stated_in_prose_match_their_source():
    from assets.partitions import DIAGNOSTIC_ARMS, lifecycle_arms
    from ops.arms.deepctr import DeepCTRConfig
    from ops.settings import DEFAULT_MAX_COST_USD
    from ops.studies.alignment.sizing import DEFAULT_HALF_WIDTH, agents_for_half_width
    from resources.llm import LLMResource

    offline_brain = lifecycle_arms(offline_brain=True)
    plain = ",".join(a for a in offline_brain if a not in DIAGNOSTIC_ARMS)
    assert (
        _stated("arms").split(":")[0] == f"{plain}, and {','.join(DIAGNOSTIC_ARMS)} with a brain that decides offline"
    )
    assert lifecycle_arms(offline_brain=False) == plain.split(",")
    assert _stated("max_epochs").startswith(f"{DeepCTRConfig.model_fields['max_epochs'].default},")
    agents = re.search(r"(\d+) for ±([0-9.]+)", _stated("alignment_agents"))
    assert agents and float(agents[2]) == DEFAULT_HALF_WIDTH
    assert int(agents[1]) == agents_for_half_width(DEFAULT_HALF_WIDTH)
    resource = LLMResource.model_fields
    assert _stated("llm_api_key_env") == resource["api_key_env"].default
    assert resource["vision"].default == "auto"
    assert "auto (default" in declared()["llm_vision"].description
    assert resource["structured_output"].default == "auto"
    assert "auto (default" in declared()["llm_structured_output"].description
    assert _stated("max_cost_usd").startswith(f"{DEFAULT_MAX_COST_USD:g} ")


def test_config_default_is_a_fresh_copy_and_names_a_missing_one():
    config_default("visits").append(9)
    assert config_default("visits") == [1, 2, 3]
    with pytest.raises(KeyError, match="SIMAB_FILES_PATH"):
        config_default("files_path")
