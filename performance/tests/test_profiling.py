"""The profile bookkeeping: per-operator differences SLA - vanilla."""
import pytest
import torch

from performance.profiling import format_differences, operator_differences, parse_profile_setting, self_milliseconds


def test_profile_settings_read_words_by_batch():
    assert parse_profile_setting("25x32") == (25, 32)
    assert parse_profile_setting("400X8") == (400, 8)
    with pytest.raises(ValueError, match="WORDSxBATCH"):
        parse_profile_setting("25,32")


def test_differences_rank_operators_by_extra_time():
    profiles = {
        "vanilla": {"train": {"aten::mm": 50.0, "aten::sdpa": 10.0, "aten::gelu": 5.0}},
        "sla": {"train": {"aten::mm": 52.0, "aten::sdpa": 20.0, "aten::gelu": 5.0, "aten::where": 3.0}},
    }
    differences = operator_differences(profiles, "train", top=3)
    assert differences["difference_ms"] == pytest.approx(15.0)
    names = [row["operator"] for row in differences["operators"]]
    assert names == ["aten::sdpa", "aten::where", "aten::mm"]
    assert differences["operators"][0]["share_of_vanilla"] == pytest.approx(10 / 65)
    assert differences["operators"][1]["vanilla_ms"] == 0.0
    assert "| `aten::sdpa` | 10.0 | 20.0 | +10.0 | +15.4% |" in format_differences(differences)


def test_self_times_come_from_the_profiler():
    a = torch.randn(64, 64)
    calls = []
    times = self_milliseconds(lambda: calls.append(a @ a), repeats=2)
    assert times["aten::mm"] > 0.0
    assert len(calls) == 3  # one warm-up, two profiled
