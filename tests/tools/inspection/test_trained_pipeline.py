"""`spacy sla gates|mask|info` on small saved pipelines: a real English
parser in front of an SLA transformer on the tiny random BERT, and parser-less
variants (gold trees, SG-Net, SLA inside a listener's own model)."""
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import numpy
import pytest
import spacy
from matplotlib.image import imread
from spacy.cli._util import app
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.inspection.mask_views import wordpiece_masks

from util import add_sla, add_textcat_listener, parsed_doc, parser_pipeline, sla_nlp, the_cat_sat

TEXTS = [
    "The cat sat on the mat.",
    "She was walking.  It is not a dog.",  # the double space is a token without wordpieces
    "A big dog ran and the cat saw it.",
    "Can he walk?",
    "The mat is big, and it is abc.",
]
WINDOW = {"mask": {"@misc": "spacy-sla.window_mask.v1", "window": 2}}
SLA_ARCHITECTURE = "spacy-sla.SLATransformerModel.v1"
SPANS = {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96}
SOFT_BIAS = {"@architectures": SLA_ARCHITECTURE, "get_spans": SPANS, "mask": {"@misc": "spacy-sla.tree_distance_bias.v1", "max_distance": 3}}
SGNET = {"@architectures": SLA_ARCHITECTURE, "get_spans": SPANS, "mask": None, "ancestor_mask": {"@misc": "spacy-sla.ancestor_mask.v1"}}
TINY_SLA_PARAMETERS = (32 + 1) * 2  # one Linear(hidden, 1) gate per layer of the tiny BERT

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, ["sla", *[str(arg) for arg in args]])


def said(result) -> str:
    """The command's output with wasabi's line wrapping undone."""
    return " ".join(result.output.split())


def png_pixels(path: Path) -> numpy.ndarray:
    pixels = imread(path)
    assert pixels.shape[0] >= 200 and pixels.shape[1] >= 200
    assert pixels.std() > 0
    return pixels


@pytest.fixture(scope="module")
def parsed(tiny_bert, tmp_path_factory) -> Dict[str, Path]:
    """Saved pipelines behind the real parser: the parser alone, with SLA,
    with window attention and with the soft tree-distance bias."""
    root = tmp_path_factory.mktemp("parsed")
    nlp = parser_pipeline()
    nlp.to_disk(root / "no_sla")
    for name, model in [("sla", {}), ("window", WINDOW), ("softbias", SOFT_BIAS)]:
        add_sla(nlp, tiny_bert, **model).to_disk(root / name)
        nlp.remove_pipe("sla_transformer")
    return {name: root / name for name in ("no_sla", "sla", "window", "softbias")}


@pytest.fixture(scope="module")
def unparsed(tiny_bert, tmp_path_factory) -> Dict[str, Path]:
    """Saved pipelines without a parser: SLA on the Docs' own (gold) trees,
    SG-Net, and a textcat that owns its SLA transformer after
    replace_listeners."""
    root = tmp_path_factory.mktemp("unparsed")
    sla_nlp(tiny_bert).to_disk(root / "gold")
    sla_nlp(tiny_bert, **SGNET).to_disk(root / "sgnet")
    nlp = sla_nlp(tiny_bert, initialize=False)
    add_textcat_listener(nlp)
    nlp.initialize(lambda: [Example.from_dict(the_cat_sat(nlp.vocab), {"cats": {"POS": 1.0, "NEG": 0.0}})])
    nlp.replace_listeners("sla_transformer", "textcat", ["model.tok2vec"])
    nlp.remove_pipe("sla_transformer")
    nlp.to_disk(root / "listener")
    return {name: root / name for name in ("gold", "sgnet", "listener")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "texts.spacy"
    nlp = spacy.blank("en")
    DocBin(docs=[nlp(text) for text in TEXTS]).to_disk(path)
    return path


def non_space_tokens(texts: List[str]) -> int:
    nlp = spacy.blank("en")
    return sum(not token.is_space for text in texts for token in nlp(text))


def test_gates_writes_one_figure_and_the_statistics_of_both_models(parsed, corpus, tmp_path):
    output = tmp_path / "plots" / "gates.png"
    result = cli("gates", parsed["sla"], corpus, "--output", output, "--compare", parsed["window"], "--batch-size", 2)
    assert result.exit_code == 0, result.output
    report = json.loads(output.with_suffix(".json").read_text())
    assert report["n_docs"] == len(TEXTS)
    assert [entry["model"] for entry in report["models"]] == [str(parsed["sla"]), str(parsed["window"])]
    expected_tokens = non_space_tokens(TEXTS)
    for entry, name in zip(report["models"], ("sla", "window")):
        nlp = spacy.load(parsed[name])
        pipe = nlp.get_pipe("sla_transformer")
        assert entry["component"] == "sla_transformer"
        assert [layer["layer"] for layer in entry["layers"]] == pipe.model.transformer.sla_layers == [0, 1]
        # the same numbers straight from doc._.sla_gates
        pipe.store_gates = True
        gates = numpy.concatenate([doc._.sla_gates for doc in nlp.pipe(TEXTS)], axis=1)
        for row, layer in zip(gates, entry["layers"]):
            assert 0.0 < layer["mean"] < 1.0 and layer["std"] > 0.0
            assert layer["n_tokens"] == expected_tokens == int((~numpy.isnan(row)).sum())
            assert layer["mean"] == pytest.approx(float(numpy.nanmean(row)), abs=1e-6)
            assert layer["std"] == pytest.approx(float(numpy.nanstd(row)), abs=1e-6)
    # different gate weights, so the two lines differ
    assert report["models"][0]["layers"][0]["mean"] != report["models"][1]["layers"][0]["mean"]
    png_pixels(output)
    assert f"{report['models'][0]['layers'][0]['mean']:.3f}" in said(result) \
        and f"over {expected_tokens} tokens" in said(result)


def test_gates_of_a_pipeline_without_parser_use_the_stored_parse(unparsed, tmp_path):
    vocab = spacy.blank("en").vocab
    docs = [the_cat_sat(vocab), parsed_doc(vocab, ["she", "was", "walking", "."], [2, 2, 2, 2]), the_cat_sat(vocab)]
    data = tmp_path / "gold.spacy"
    DocBin(docs=docs).to_disk(data)
    output = tmp_path / "gates.svg"
    result = cli("gates", unparsed["gold"], data, "-o", output, "--limit", 2)
    assert result.exit_code == 0, result.output
    report = json.loads(output.with_suffix(".json").read_text())
    assert report["n_docs"] == 2
    assert [layer["n_tokens"] for layer in report["models"][0]["layers"]] == [7 + 4, 7 + 4]
    assert "<svg" in output.read_text()


def test_gates_refuses_pipelines_without_gates(parsed, unparsed, corpus, tmp_path):
    output = tmp_path / "gates.png"
    result = cli("gates", parsed["no_sla"], corpus, "-o", output)
    assert result.exit_code == 1 and "no sla_transformer component" in said(result)
    result = cli("gates", unparsed["sgnet"], corpus, "-o", output)
    assert result.exit_code == 1 and "has no SLA layers" in said(result)
    result = cli("gates", unparsed["listener"], corpus, "-o", output)
    assert result.exit_code == 1 and "SLA sits inside textcat" in said(result)
    result = cli("gates", parsed["sla"], corpus, "-o", tmp_path / "gates.txt")
    assert result.exit_code == 1 and "--output must end in" in said(result)
    assert not output.exists()


def test_mask_png_with_the_displacy_parse_beside_it(parsed, tmp_path):
    output = tmp_path / "mask.png"
    result = cli("mask", parsed["sla"], "The cat sat on the mat.", "--output", output)
    assert result.exit_code == 0, result.output
    png_pixels(output)
    svg = output.with_suffix(".svg").read_text()
    assert "<svg" in svg and "displacy" in svg and ">mat" in svg
    # one arc per word but the root; displaCy merges the full stop into "mat."
    assert svg.count("displacy-arrowhead") == 5


def test_mask_wordpieces_are_the_matrices_the_model_uses(parsed, tmp_path):
    nlp = spacy.load(parsed["sla"])
    pipe = nlp.get_pipe("sla_transformer")
    doc = nlp("She was walking on the mat.")
    (view,) = wordpiece_masks(doc, pipe.model)
    assert view.labels == doc._.trf_data.wordpieces.strings[0]
    assert view.labels[:5] == ["[CLS]", "she", "was", "walk", "##ing"]
    numpy.testing.assert_array_equal(view.matrix, pipe.local_masks([doc])[0])
    output = tmp_path / "pieces.html"
    result = cli("mask", parsed["sla"], "She was walking on the mat.", "-o", output, "--wordpieces")
    assert result.exit_code == 0, result.output
    page = output.read_text()
    assert page.count("<table") == 1 and page.count("<tr>") == len(view.labels) + 1
    assert "##ing" in page and "[CLS]" in page and "<svg" in page
    assert page.count('style="background:#333"') == int(view.matrix.sum())


def test_mask_html_page_is_self_contained(parsed, tmp_path):
    output = tmp_path / "mask.html"
    text = "The cat sat on the mat, and she ran."
    result = cli("mask", parsed["window"], text, "-o", output)
    assert result.exit_code == 0, result.output
    page = output.read_text()
    assert "<svg" in page and "displacy" in page and "WindowMask(window=2" in page
    for word in ["The", "cat", "sat", "mat", "she", "ran"]:
        assert f'<th class="query">{word}</th>' in page
    assert "<script" not in page and "src=" not in page and "href=\"http" not in page


def test_mask_of_a_distance_variant_shows_the_buckets(parsed, tmp_path):
    output = tmp_path / "buckets.html"
    result = cli("mask", parsed["softbias"], "The cat sat on the mat.", "-o", output)
    assert result.exit_code == 0, result.output
    page = output.read_text()
    assert "TreeDistanceBias(max_distance=3)" in page and "0-3 hops, 4 farther or another sentence" in page
    cells = [int(value) for value in re.findall(r'">(\d)</td>', page)]
    assert len(cells) == 7 * 7 and set(cells) <= {0, 1, 2, 3, 4} and cells[0] == 0 and 4 in cells
    result = cli("mask", parsed["softbias"], "The cat sat on the mat.", "-o", tmp_path / "buckets.png", "--wordpieces")
    assert result.exit_code == 0, result.output
    png_pixels(tmp_path / "buckets.png")


def test_mask_explains_what_it_cannot_draw(parsed, unparsed, tmp_path):
    result = cli("mask", unparsed["sgnet"], "The cat sat.", "-o", tmp_path / "mask.png")
    assert result.exit_code == 1 and "no local mask builder" in said(result)
    result = cli("mask", parsed["no_sla"], "The cat sat.", "-o", tmp_path / "mask.png")
    assert result.exit_code == 1 and "no syntax-aware transformer" in said(result)
    result = cli("mask", unparsed["gold"], "The cat sat.", "-o", tmp_path / "mask.png")
    assert result.exit_code == 1 and "has no parser" in said(result)


def test_plots_without_matplotlib_ask_for_the_extra(parsed, corpus, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = cli("mask", parsed["sla"], "The cat sat.", "-o", tmp_path / "mask.png")
    assert result.exit_code == 1 and "pip install spacy-sla[plots]" in said(result)
    result = cli("gates", parsed["sla"], corpus, "-o", tmp_path / "gates.png")
    assert result.exit_code == 1 and "pip install spacy-sla[plots]" in said(result)
    # the HTML page needs no matplotlib
    assert cli("mask", parsed["sla"], "The cat sat.", "-o", tmp_path / "mask.html").exit_code == 0


def test_info_describes_the_sla_component(parsed):
    result = cli("info", parsed["sla"], "--json")
    assert result.exit_code == 0, result.output
    (info,) = json.loads(result.stdout)["components"]
    transformer = spacy.load(parsed["sla"]).get_pipe("sla_transformer").model.transformer
    assert info["component"] == "sla_transformer" and info["factory"] == "sla_transformer"
    assert info["architecture"] == "spacy-sla.SLATransformerModel.v1" and info["config_path"] == "model"
    assert info["model_type"] == "bert" and info["n_layers"] == 2 and info["hidden_size"] == 32
    assert info["sla_layers"] == [0, 1]
    assert info["mask"] == "SyntaxMask(threshold=3, punct_rule='authors', neighbours=True)"
    assert info["mask_config"] == {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 3, "punct_rule": "authors", "neighbours": True}
    assert info["ancestor_mask"] is None and info["parent_attention"] is None
    assert info["sla_parameters"] == TINY_SLA_PARAMETERS
    assert info["parameters"] == sum(p.numel() for p in transformer.parameters())
    assert info["store_gates"] is False
    table = cli("info", parsed["sla"])
    assert table.exit_code == 0 and "sla_parameters" in said(table) and str(TINY_SLA_PARAMETERS) in said(table)


def test_info_finds_sg_net_and_sla_inside_a_listener(unparsed):
    result = cli("info", unparsed["sgnet"], "--json")
    assert result.exit_code == 0, result.output
    (info,) = json.loads(result.stdout)["components"]
    assert info["architecture"] == SLA_ARCHITECTURE and info["sla_layers"] == [] and info["mask"] is None
    assert info["ancestor_mask"] == "AncestorMask()"
    assert info["syntax_guided_mask_config"] == {"@misc": "spacy-sla.ancestor_mask.v1"}
    assert info["sla_parameters"] > 0  # the syntax-guided layer
    result = cli("info", unparsed["listener"], "--json")
    assert result.exit_code == 0, result.output
    (info,) = json.loads(result.stdout)["components"]
    assert info["component"] == "textcat" and info["config_path"] == "model.tok2vec"
    assert info["architecture"] == "spacy-sla.SLATok2VecTransformer.v1"
    assert info["sla_layers"] == [0, 1] and info["sla_parameters"] == TINY_SLA_PARAMETERS
    assert info["store_gates"] is None


def test_info_of_a_pipeline_without_sla_fails(parsed):
    result = cli("info", parsed["no_sla"])
    assert result.exit_code == 1 and "no component carries syntax-aware attention" in said(result)
    result = cli("info", "no_such_pipeline_anywhere")
    assert result.exit_code == 1 and "Could not load" in said(result)


def test_the_commands_are_listed_by_spacy():
    result = subprocess.run([sys.executable, "-m", "spacy", "sla", "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for command in ("gates", "mask", "info"):
        assert f"  {command} " in result.stdout
