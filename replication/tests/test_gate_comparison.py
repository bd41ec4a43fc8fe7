"""The gate analysis over seeds (replication/gate_comparison.py and
`python -m replication gate-summary`), on hand-written reports of `spacy sla gates`."""
import json
import math

import pytest
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from replication.cli import app as replication_app
from replication.gate_comparison import compare_gates, gate_tables, read_gate_pair


def write_report(path, first, second, layers=None, names=("sla/model-last", "window/model-last")):
    layers = list(range(len(first))) if layers is None else layers

    def model(name, means):
        return {"model": name, "component": "transformer",
                "layers": [{"layer": layer, "mean": mean, "std": 0.05, "n_tokens": 10} for layer, mean in zip(layers, means)]}

    path.write_text(json.dumps({"data": "dev.spacy", "n_docs": 3, "models": [model(names[0], first), model(names[1], second)]}))
    return path


@pytest.fixture
def three_seeds(tmp_path):
    # Layer 0: differences 0.1, 0.2, 0.3 (always higher); layer 1: -0.1, 0.0, +0.1 (covers 0).
    return [
        write_report(tmp_path / "seed0.json", [0.6, 0.4], [0.5, 0.5]),
        write_report(tmp_path / "seed1.json", [0.7, 0.5], [0.5, 0.5]),
        write_report(tmp_path / "seed2.json", [0.8, 0.6], [0.5, 0.5]),
    ]


def test_differences_and_paired_intervals_match_a_hand_computation(three_seeds):
    comparison = compare_gates([read_gate_pair(path) for path in three_seeds])
    layer0, layer1 = comparison["per_layer"]
    # Differences 0.1, 0.2, 0.3: mean 0.2, sd 0.1, half width t(0.975, 2) * 0.1 / sqrt(3) = 0.2484.
    assert layer0["differences"] == pytest.approx([0.1, 0.2, 0.3])
    assert layer0["mean"] == pytest.approx(0.2)
    assert layer0["half_width"] == pytest.approx(4.303 * 0.1 / math.sqrt(3), abs=5e-5)  # t to three decimals
    assert layer0["verdict"] == "not shown"  # 0.2 - 0.2484 < 0
    assert layer1["differences"] == pytest.approx([-0.1, 0.0, 0.1])
    assert layer1["verdict"] == "not shown"
    # Means over layers: 0.0, 0.1, 0.2 -> mean 0.1, same half width.
    over = comparison["over_layers"]
    assert over["differences"] == pytest.approx([0.0, 0.1, 0.2])
    assert (over["low"], over["high"]) == pytest.approx((0.1 - 0.2484, 0.1 + 0.2484), abs=1e-4)


def test_a_consistent_difference_is_higher_or_lower(tmp_path):
    higher = [write_report(tmp_path / f"h{seed}.json", [0.52 + 0.001 * seed], [0.50]) for seed in range(3)]
    lower = [write_report(tmp_path / f"l{seed}.json", [0.50], [0.52 + 0.001 * seed]) for seed in range(3)]
    assert compare_gates([read_gate_pair(path) for path in higher])["over_layers"]["verdict"] == "higher"
    assert compare_gates([read_gate_pair(path) for path in lower])["over_layers"]["verdict"] == "lower"
    single = compare_gates([read_gate_pair(higher[0])])["over_layers"]
    assert (single["n"], single["low"], single["verdict"]) == (1, None, "not shown (n<2)")


def test_tables_show_every_report_and_layer(three_seeds):
    table = gate_tables(compare_gates([read_gate_pair(path) for path in three_seeds]))
    assert f"| {three_seeds[1]} | 0.700 0.500 | 0.500 0.500 | +0.200 +0.000 | +0.1000 |" in table
    assert "| 0 | +0.2000 [-0.0484, +0.4484] (n=3) | not shown |" in table
    assert "| mean over layers | +0.1000 [-0.1484, +0.3484] (n=3) | not shown |" in table


@pytest.mark.parametrize(
    "report, reason",
    [
        ({"models": [{"model": "a", "layers": []}]}, "holds 1 model(s), not 2"),
        ({"models": [{"model": "a"}, {"model": "b"}]}, "no 'model' name or 'layers'"),
        ({"models": [{"model": "a", "layers": [{"layer": 0, "mean": 0.5}]},
                     {"model": "b", "layers": [{"layer": 1, "mean": 0.5}]}]}, "SLA layers differ"),
        ({"models": [{"model": "a", "layers": [{"layer": 0, "mean": None}]},
                     {"model": "b", "layers": [{"layer": 0, "mean": 0.5}]}]}, "a layer has no tokens"),
    ],
)
def test_a_report_that_cannot_be_compared_is_a_coded_error(tmp_path, report, reason):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    with pytest.raises(ValueError, match=r"\[SLA-REPLICATION-E019\]") as error:
        read_gate_pair(path)
    assert reason in str(error.value)


def test_reports_of_different_layers_are_not_paired(tmp_path):
    pairs = [read_gate_pair(write_report(tmp_path / "a.json", [0.5, 0.5], [0.5, 0.5])),
             read_gate_pair(write_report(tmp_path / "b.json", [0.5], [0.5]))]
    with pytest.raises(ValueError, match=r"\[SLA-REPLICATION-E019\].*differ from"):
        compare_gates(pairs)


def test_the_command_prints_the_tables_and_writes_json(three_seeds, tmp_path):
    output = tmp_path / "gates.json"
    result = CliRunner().invoke(replication_app, ["gate-summary", *map(str, three_seeds), "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert "| mean over layers | +0.1000 [-0.1484, +0.3484] (n=3) | not shown |" in result.output
    written = json.loads(output.read_text())
    assert written["layers"] == [0, 1]
    assert written["over_layers"]["mean"] == pytest.approx(0.1)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    failed = CliRunner().invoke(replication_app, ["gate-summary", str(bad)])
    assert failed.exit_code == 1 and "[SLA-REPLICATION-E019]" in failed.output and "Traceback" not in failed.output
