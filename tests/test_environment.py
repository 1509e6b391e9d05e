"""The table of environment variables (``_environment.py``) and the code that reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from avdenoise_vs import _environment
from avdenoise_vs._bm3d.cuda import bm3d_pass as bm3d
from avdenoise_vs._cuda import transfer as _transfer
from avdenoise_vs._environment import (
    DEBUG_KEYS,
    VARIABLES,
    CudaTuning,
    cuda_tuning,
    default,
    seconds,
    switch,
)
from avdenoise_vs._warmup import queue as warmup
from avdenoise_vs._warmup import report as _warmup_report

NAMES = {variable.name for variable in VARIABLES}
ROOT = Path(__file__).resolve().parents[1]


def test_switch_default_value_and_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AVDENOISE_CUDA_SYNC", raising=False)
    assert switch("AVDENOISE_CUDA_SYNC") == "auto"
    monkeypatch.setenv("AVDENOISE_CUDA_SYNC", " Block ")
    assert switch("AVDENOISE_CUDA_SYNC") == "block"
    monkeypatch.setenv("AVDENOISE_CUDA_SYNC", "")
    assert switch("AVDENOISE_CUDA_SYNC") == "auto"


def test_bad_switch_names_the_variable_the_value_and_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AVDENOISE_CUDA_SYNC", "sleep")
    with pytest.raises(
        ValueError,
        match=r"AVDENOISE_CUDA_SYNC must be one of 'auto', 'spin', 'yield', .*got 'sleep'",
    ):
        switch("AVDENOISE_CUDA_SYNC")


def test_tuning_defaults_values_and_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AVDENOISE_DEBUG", raising=False)
    assert cuda_tuning() == CudaTuning("auto", None, None)
    monkeypatch.setenv("AVDENOISE_DEBUG", " Transfer = Direct , bm3d_cache= 12 ,")
    assert cuda_tuning() == CudaTuning("direct", None, 12)
    monkeypatch.setenv("AVDENOISE_DEBUG", "bm3d_workspaces=3,transfer=")  # empty: the default
    assert cuda_tuning() == CudaTuning("auto", 3, None)


def test_at_most_three_debug_keys() -> None:
    """A comparison that has been measured keeps its winner (docs/BENCHMARKS.md)."""
    assert [key.key for key in DEBUG_KEYS] == ["transfer", "bm3d_workspaces", "bm3d_cache"]


def test_bad_debug_value_names_the_variable_the_item_and_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AVDENOISE_DEBUG", "bm3d_cache=4,transfer=pinned")
    with pytest.raises(
        ValueError,
        match=r"AVDENOISE_DEBUG: transfer must be one of 'auto', 'direct', 'staged', "
        r".*got 'pinned' in 'transfer=pinned'",
    ):
        cuda_tuning()


@pytest.mark.parametrize("text", ["pinned=1", "transfer", "=direct", "host_copies=python"])
def test_bad_debug_key_names_the_variable_the_item_and_the_keys(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("AVDENOISE_DEBUG", f"transfer=staged,{text}")
    with pytest.raises(
        ValueError,
        match=rf"AVDENOISE_DEBUG takes key=value items with a key of 'transfer', "
        rf"'bm3d_workspaces', 'bm3d_cache', got '{text}'",
    ):
        cuda_tuning()


def test_debug_key_given_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AVDENOISE_DEBUG", "transfer=direct,transfer=staged")
    with pytest.raises(ValueError, match="AVDENOISE_DEBUG gives transfer twice"):
        cuda_tuning()


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5"])
def test_bad_positive_int(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("AVDENOISE_DEBUG", f"bm3d_workspaces={text}")
    with pytest.raises(
        ValueError,
        match=rf"AVDENOISE_DEBUG: bm3d_workspaces must be a positive integer, got '{text}' "
        rf"in 'bm3d_workspaces={text}'",
    ):
        cuda_tuning()


@pytest.mark.parametrize(
    ("text", "value"), [(None, 180.0), ("", 180.0), ("0", 0.0), (" 2.5 ", 2.5)]
)
def test_seconds(monkeypatch: pytest.MonkeyPatch, text, value) -> None:
    if text is None:
        monkeypatch.delenv("AVDENOISE_WARMUP_WAIT", raising=False)
    else:
        monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", text)
    assert seconds("AVDENOISE_WARMUP_WAIT") == value


@pytest.mark.parametrize("text", ["-1", "soon", "inf", "nan", "3 min"])
def test_bad_seconds_name_the_variable_the_value_and_what_is_allowed(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("AVDENOISE_WARMUP_WAIT", text)
    with pytest.raises(
        ValueError,
        match=rf"AVDENOISE_WARMUP_WAIT must be a number of seconds, at least 0, got '{text}'$",
    ):
        seconds("AVDENOISE_WARMUP_WAIT")


def test_only_variables_of_the_table_are_read() -> None:
    with pytest.raises(KeyError):
        switch("AVDENOISE_NOT_A_VARIABLE")


def test_table_agrees_with_the_code() -> None:
    assert {warmup.QUEUE_SWITCH, _warmup_report.REPORT_ENV, _environment.DEBUG} <= NAMES
    assert warmup.WAIT_VARIABLE in NAMES and warmup.DEFAULT_WAIT_LIMIT_S == 180.0
    transfer = next(k for k in DEBUG_KEYS if k.key == "transfer")
    assert sorted(transfer.choices) == sorted(_transfer.TRANSFERS)
    workspaces = next(k for k in DEBUG_KEYS if k.key == "bm3d_workspaces")
    spatial, temporal = bm3d.DEFAULT_WORKSPACES
    assert workspaces.default == f"{spatial} spatial, {temporal} V-BM3D"
    assert f"a spatial pass runs {bm3d.SPATIAL_FRAMES_IN_FLIGHT} " in workspaces.doc
    assert default("CUDA_DEVICE_MAX_CONNECTIONS") == "1"


def test_markdown_tables_have_a_row_an_entry() -> None:
    rows = _environment.markdown_table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [v.name for v in VARIABLES]
    rows = _environment.debug_table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [k.key for k in DEBUG_KEYS]


def test_documented_tables_are_generated_from_the_code() -> None:
    for table, page in [
        (_environment.markdown_table(), "README.md"),
        (_environment.debug_table(), "docs/ARCHITECTURE.md"),
    ]:
        assert table in (ROOT / page).read_text(), (
            f"{page} is out of date: run python scripts/gen_readme.py"
        )


def test_sync_switch_agrees_with_the_driver_flags() -> None:
    from avdenoise_vs._cuda.calls import SYNC_FLAGS

    sync = next(v for v in VARIABLES if v.name == "AVDENOISE_CUDA_SYNC")
    assert set(sync.choices) == {"auto", *SYNC_FLAGS}
    # CU_CTX_SCHED_SPIN, CU_CTX_SCHED_YIELD, CU_CTX_SCHED_BLOCKING_SYNC
    assert SYNC_FLAGS == {"spin": 1, "yield": 2, "block": 4}
