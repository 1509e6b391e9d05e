"""The table of environment variables (``_environment.py``) and the code that reads them."""

from __future__ import annotations

import pytest

from avdenoise_vs import _environment, _warmup_report, warmup
from avdenoise_vs._cuda import backend, bm3d
from avdenoise_vs._environment import VARIABLES, default, positive_int, switch

NAMES = {variable.name for variable in VARIABLES}


def test_switch_default_value_and_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AVDENOISE_CUDA_CALLS", raising=False)
    assert switch("AVDENOISE_CUDA_CALLS") == "held"
    monkeypatch.setenv("AVDENOISE_CUDA_CALLS", " Released ")
    assert switch("AVDENOISE_CUDA_CALLS") == "released"
    monkeypatch.setenv("AVDENOISE_CUDA_CALLS", "")
    assert switch("AVDENOISE_CUDA_CALLS") == "held"


def test_bad_switch_names_the_variable_the_value_and_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AVDENOISE_TRANSFER", "pinned")
    with pytest.raises(
        ValueError,
        match=r"AVDENOISE_TRANSFER must be one of 'auto', 'direct', 'staged', .*got 'pinned'",
    ):
        switch("AVDENOISE_TRANSFER")


@pytest.mark.parametrize(("text", "value"), [(None, None), ("", None), ("3", 3), (" 12 ", 12)])
def test_positive_int(monkeypatch: pytest.MonkeyPatch, text, value) -> None:
    if text is None:
        monkeypatch.delenv("AVDENOISE_BM3D_WORKSPACES", raising=False)
    else:
        monkeypatch.setenv("AVDENOISE_BM3D_WORKSPACES", text)
    assert positive_int("AVDENOISE_BM3D_WORKSPACES") == value


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5"])
def test_bad_positive_int(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("AVDENOISE_BM3D_WORKSPACES", text)
    with pytest.raises(
        ValueError, match=rf"BM3D_WORKSPACES must be a positive integer, got '{text}'"
    ):
        positive_int("AVDENOISE_BM3D_WORKSPACES")


def test_only_variables_of_the_table_are_read() -> None:
    with pytest.raises(KeyError):
        switch("AVDENOISE_NOT_A_VARIABLE")


def test_table_agrees_with_the_code() -> None:
    assert {warmup._SWITCH_ENV, _warmup_report.REPORT_ENV} <= NAMES
    transfer = next(v for v in VARIABLES if v.name == "AVDENOISE_TRANSFER")
    assert sorted(transfer.choices) == sorted(backend._TRANSFERS)
    spatial, temporal = bm3d.DEFAULT_WORKSPACES
    assert default("AVDENOISE_BM3D_WORKSPACES") == f"{spatial} spatial, {temporal} V-BM3D"
    assert default("CUDA_DEVICE_MAX_CONNECTIONS") == "1"


def test_markdown_table_has_a_row_a_variable() -> None:
    rows = _environment.markdown_table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [v.name for v in VARIABLES]


def test_sync_switch_agrees_with_the_driver_flags() -> None:
    from avdenoise_vs._cuda._calls import SYNC_FLAGS

    sync = next(v for v in VARIABLES if v.name == "AVDENOISE_CUDA_SYNC")
    assert set(sync.choices) == {"auto", *SYNC_FLAGS}
    # CU_CTX_SCHED_SPIN, CU_CTX_SCHED_YIELD, CU_CTX_SCHED_BLOCKING_SYNC
    assert SYNC_FLAGS == {"spin": 1, "yield": 2, "block": 4}
