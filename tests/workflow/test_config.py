"""Config: every shipped file validates; bad files fail naming the key; dataclasses mirror params.yaml."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from burnqed.config import (
    SECTIONS,
    ConfigError,
    EvalConfig,
    LeanConfig,
    SearchConfig,
    deep_merge,
    load_params,
    schema,
    validate_params,
)

REPO = Path(__file__).resolve().parents[2]
OVERLAYS = sorted((REPO / "config").glob("*.yaml"))


@pytest.fixture()
def params() -> dict:
    return load_params(REPO / "params.yaml")


def write(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return p


@pytest.mark.parametrize("overlay", [None, *OVERLAYS], ids=lambda o: o.name if o else "params.yaml")
def test_every_shipped_config_loads_into_every_section(overlay):
    params = load_params(REPO / "params.yaml", [overlay] if overlay else [])
    for name, cls in SECTIONS.items():
        assert isinstance(cls.from_dict(params[name]), cls)


@pytest.mark.parametrize(
    "design", sorted((REPO / "config/designs").glob("*.yaml")), ids=lambda d: d.name
)
def test_every_development_design_loads_on_the_demo_and_dev_overlays(design):
    """config/designs/<design>.yaml (docs/development.md's runs) on top of the demo and dev overlays."""
    params = load_params(
        REPO / "params.yaml", [REPO / "config/demo.yaml", REPO / "config/dev.yaml", design]
    )
    for name, cls in SECTIONS.items():
        assert isinstance(cls.from_dict(params[name]), cls)


def test_demo_overlay_is_shipped():
    assert REPO / "config" / "demo.yaml" in OVERLAYS


def test_dataclass_defaults_mirror_params_yaml(params):
    # The dataclasses' defaults are the documented real-run defaults: they must not drift apart.
    for name, cls in SECTIONS.items():
        assert cls.from_dict(params[name]) == cls(), (
            f"section {name!r} differs from its dataclass defaults"
        )


def test_schema_and_dataclasses_have_the_same_keys():
    props = schema()["properties"]
    for name, cls in SECTIONS.items():
        schema_keys = set(props[name]["properties"])
        fields = {f for f in cls.__dataclass_fields__ if f != "section"}
        assert schema_keys == fields, name


def test_every_schema_key_is_described():
    def walk(node, path):
        if isinstance(node, dict):
            for key, sub in node.get("properties", {}).items():
                has = "description" in sub or (
                    "$ref" in sub and "description" in schema()["$defs"][sub["$ref"].split("/")[-1]]
                )
                assert has, f"{path}{key} has no description"
                walk(sub, f"{path}{key}.")
            if "items" in node:
                walk(node["items"], path)

    walk(schema(), "")


def test_every_params_key_is_commented():
    # params.yaml is a manual: each key of a section carries a comment above it or on its line.
    lines = (REPO / "params.yaml").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "-")) or ":" not in stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if indent > 2:  # nested items of lists/maps are described by their parent's comment
            continue
        prev = lines[i - 1].strip() if i else ""
        assert "#" in line or prev.startswith("#") or stripped.endswith(":"), (
            f"params.yaml:{i + 1}: {stripped!r} has no comment"
        )


def test_unknown_key_is_named(tmp_path, params):
    bad = copy.deepcopy(params)
    bad["search"]["max_nodez"] = 5
    with pytest.raises(ConfigError, match=r"search\.max_nodez: unknown key") as e:
        load_params(write(tmp_path, bad))
    assert str(tmp_path / "params.yaml") in str(e.value)


def test_unknown_section_is_named(tmp_path, params):
    bad = copy.deepcopy(params)
    bad["serch"] = {"max_nodes": 5}
    with pytest.raises(ConfigError, match=r"serch: unknown key"):
        load_params(write(tmp_path, bad))


def test_wrong_type_is_named(tmp_path, params):
    bad = copy.deepcopy(params)
    bad["lean"]["workers"] = "six"
    with pytest.raises(ConfigError, match=r"lean\.workers: 'six' is not of type 'integer'"):
        load_params(write(tmp_path, bad))


def test_out_of_range_is_named(tmp_path, params):
    bad = copy.deepcopy(params)
    bad["search"]["max_nodes"] = 0
    with pytest.raises(ConfigError, match=r"search\.max_nodes: 0 is less than the minimum of 1"):
        load_params(write(tmp_path, bad))


def test_nested_list_item_is_named(tmp_path, params):
    bad = copy.deepcopy(params)
    bad["data"]["sources"][0]["format"] = "csv"
    with pytest.raises(ConfigError, match=r"data\.sources\[0\]\.format"):
        load_params(write(tmp_path, bad))


def test_missing_key_is_named(tmp_path, params):
    bad = copy.deepcopy(params)
    del bad["search"]["timeout_s"]
    with pytest.raises(ConfigError, match=r"search: 'timeout_s' is a required property"):
        load_params(write(tmp_path, bad))


def test_cross_field_check_is_named(tmp_path, params):
    bad = copy.deepcopy(params)
    bad["eval"]["budgets"] = [300, 100]
    with pytest.raises(ConfigError, match=r"eval\.budgets: must be strictly increasing"):
        load_params(write(tmp_path, bad))


def test_bad_regex_in_guard_is_named(params):
    bad = copy.deepcopy(params)
    bad["lean"]["banned_tactics"] = ["(unclosed"]
    with pytest.raises(ConfigError, match=r"lean\.banned_tactics\[0\]: not a regular expression"):
        validate_params(bad)


def test_yaml_syntax_error_names_file(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("search: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML") as e:
        load_params(p)
    assert str(p) in str(e.value)


def test_overlay_merges_maps_and_replaces_lists():
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 2}
    merged = deep_merge(base, {"a": {"y": [3]}, "b": 5})
    assert merged == {"a": {"x": 1, "y": [3]}, "b": 5}
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 2}  # the base is not mutated


def test_sections_are_frozen_and_typed(params):
    s = SearchConfig.from_dict(params["search"])
    with pytest.raises(AttributeError):
        s.max_nodes = 3  # type: ignore[misc]
    lean = LeanConfig.from_dict(params["lean"])
    assert isinstance(lean.repl_command, tuple)
    assert EvalConfig.from_dict(params["eval"]).budgets == (100, 300, 600)
    assert LeanConfig.from_dict(lean.to_dict()) == lean


def test_every_shipped_sglang_server_runs_deterministic_inference():
    """Per-candidate seeds act only in SGLang's deterministic mode, and an /encode call batches the
    states of several searches: both servers run batch-invariant kernels (docs/cloud.md §3, §7)."""
    checked = []
    for overlay in [None, *OVERLAYS]:
        policy = load_params(REPO / "params.yaml", [overlay] if overlay else [])["policy"]
        if policy["backend"] != "sglang":
            continue
        for key in ("server_command", "embedding_server_command"):
            command = policy[key]
            assert "--enable-deterministic-inference" in command, (overlay, key, command)
            assert "--disable-radix-cache" in command, (overlay, key, command)
        checked.append(overlay.name if overlay else "params.yaml")
    assert {"params.yaml", "a100-7b.yaml"} <= set(checked), checked


def test_the_instruction_set_pin_is_a_checked_top_level_setting(tmp_path, params):
    from burnqed import isa

    described = schema()["properties"]["cpu_isa"]
    assert described["enum"] == list(isa.SETTINGS) and "avx2" in described["description"]
    assert params["cpu_isa"] == isa.DEFAULT == "avx2"  # params.yaml's default is the module's
    bad = copy.deepcopy(params)
    bad["cpu_isa"] = "avx512"
    with pytest.raises(ConfigError, match=r"cpu_isa: 'avx512' is not one of \['avx2', 'native'\]"):
        load_params(write(tmp_path, bad))
    del bad["cpu_isa"]
    with pytest.raises(ConfigError, match=r"'cpu_isa' is a required property"):
        load_params(write(tmp_path, bad))


@pytest.mark.parametrize(
    "design", sorted((REPO / "config/designs").glob("*.yaml")), ids=lambda p: p.stem
)
def test_each_development_design_validates_and_trains_what_a_confirmation_run_trains(design):
    """config/designs/<d>.yaml (docs/development.md) merges over the demo with the dev overlay or
    without it; a development run of it trains what a confirmation run trains (only eval differs),
    and it sets neither the seed nor the benchmark."""
    demo = load_params(REPO / "params.yaml", [REPO / "config/demo.yaml", design])
    dev = load_params(
        REPO / "params.yaml", [REPO / "config/demo.yaml", REPO / "config/dev.yaml", design]
    )
    assert (dev["eval"]["benchmark"], demo["eval"]["benchmark"]) == (
        "proplogic_dev",
        "proplogic_test",
    )
    assert {k: v for k, v in dev.items() if k != "eval"} == {
        k: v for k, v in demo.items() if k != "eval"
    }
    raw = yaml.safe_load(design.read_text(encoding="utf-8"))
    assert not {"seed", "seeds", "eval"} & set(raw), (
        "a design sets neither the seed nor the benchmark"
    )


@pytest.mark.parametrize(
    "registration",
    [
        p
        for p in sorted(REPO.glob("studies/*/registration.yaml"))
        if not (p.parent / "WITHDRAWN.md").is_file()
    ],
    ids=lambda p: p.parent.name,
)
def test_a_live_registration_freezes_the_design_its_text_names(registration):
    """The first learning registration named design D3 but froze config/designs/d2.yaml
    (studies/learning/WITHDRAWN.md): the design a registration's description names is the one
    file of config/designs/ its configfiles list (D3 of the learning issue, P4 of issue 61)."""
    reg = yaml.safe_load(registration.read_text(encoding="utf-8"))
    named = set(re.findall(r"\bdesign ([A-Z]\d+)\b", reg["description"]))
    frozen = {
        Path(f).stem.upper()
        for f in reg["design"]["configfiles"]
        if f.startswith("config/designs/")
    }
    assert len(named) <= 1 and named == frozen, (registration, named, frozen)
