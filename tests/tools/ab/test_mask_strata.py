"""`spacy sla ab --by-mask` (and `python -m replication bootstrap --by-mask`): the dev documents a model's local mask
restricts, each score on a part of the dev set, and the comparison of a
variant with the reference on each part."""
import json

import numpy
import pytest
from spacy.tokens import DocBin

from spacy_sla.tools.ab.mask_strata import (
    GAP,
    RESTRICTED,
    STRATA_FILE,
    UNRESTRICTED,
    kept_strata,
    restrict_evaluation,
    restricted_documents,
    rows_by_mask,
)
from spacy_sla.tools.ab.statistics import CountStatistic
from spacy_sla.tools.ab.tables import strata_table

from util import add_sla, parser_pipeline

SHORT, LONG = "Dogs bark", "The old man with the red hat walked slowly to the small shop near the busy station"


def accuracy_evaluation(correct):
    """An evaluation with accuracy's per-document confusion cells (gold
    always POSITIVE) and one score recomputed on draws of the whole set."""
    counts = numpy.array([[0, 0, 0, 1] if right else [0, 0, 1, 0] for right in correct], dtype=numpy.int64)
    return {"documents": len(correct), "statistics": {
        "cats_accuracy": {"method": "counts", "statistic": CountStatistic("confusion_accuracy", counts).to_json()},
        "cats_auc": {"method": "recomputed", "draws": [0.5], "resamples": 1, "random_seed": 0},
    }}


def test_a_part_of_the_dev_set_is_scored_on_its_own_documents():
    evaluation = accuracy_evaluation([True, False, True, True, False])
    part = restrict_evaluation(evaluation, numpy.array([True, True, False, False, True]))
    assert part["documents"] == 3 and part["scores"] == {"cats_accuracy": pytest.approx(1 / 3)}
    assert "cats_auc" not in part["statistics"]  # its draws were of the whole set
    assert len(part["statistics"]["cats_accuracy"]["statistic"]["counts"]) == 3
    empty = restrict_evaluation(evaluation, numpy.zeros(5, dtype=bool))
    assert empty["documents"] == 0 and empty["scores"] == {"cats_accuracy": None}
    with pytest.raises(ValueError, match="4 strata for 5 documents"):
        restrict_evaluation(evaluation, numpy.ones(4, dtype=bool))


def test_each_part_pairs_the_seeds_on_the_same_documents():
    # six documents, the first three restricted. Seed 0: sla right on documents 0 and 1 where vanilla is
    # right on 0 only (+1/3 restricted), both right on 3 and 4 (0 unrestricted); seed 1: sla right on 0,
    # vanilla on 0, 1, 2 (-2/3 restricted), sla right on 3, 4, 5 and vanilla on 3 (+2/3 unrestricted).
    evaluations = {
        ("sla", 0): accuracy_evaluation([True, True, False, True, True, False]),
        ("vanilla", 0): accuracy_evaluation([True, False, False, True, True, False]),
        ("sla", 1): accuracy_evaluation([True, False, False, True, True, True]),
        ("vanilla", 1): accuracy_evaluation([True, True, True, True, False, False]),
    }
    strata = [True, True, True, False, False, False]
    rows = rows_by_mask("sla", "vanilla", [0, 1], evaluations, "cats_accuracy", 300, lambda seed: strata)
    by_stratum = {row["stratum"]: row for row in rows}
    restricted, unrestricted = by_stratum[RESTRICTED], by_stratum[UNRESTRICTED]
    assert restricted["documents"] == 3 and unrestricted["documents"] == 3
    assert restricted["over_seeds"]["differences"] == pytest.approx([1 / 3, -2 / 3])
    assert unrestricted["over_seeds"]["differences"] == pytest.approx([0, 2 / 3])
    gap = by_stratum[GAP]
    assert gap["documents"] == 6 and gap["over_seeds"]["differences"] == pytest.approx([1 / 3, -4 / 3])
    for row in rows:
        interval = row["over_documents"]
        assert interval["low"] <= row["over_seeds"]["mean"] <= interval["high"]
    assert "the mask hides nothing | 3 | 2 | +0.00, +66.67 |" in strata_table(rows)

    every_one = rows_by_mask("sla", "vanilla", [0, 1], evaluations, "cats_accuracy", 50, lambda seed: [True] * 6)
    table = strata_table(every_one)
    assert [row["documents"] for row in every_one] == [6, 0, 6]
    assert "the mask hides some pairs | 6 | 2 |" in table
    assert "hides nothing |" not in table and "restricted − unrestricted" not in table
    assert table.endswith("- sla: no dev document where the mask hides nothing, so no comparison of the two parts")

    different = {0: strata, 1: [True, True, False, False, False, False]}
    with pytest.raises(ValueError, match=r"\[SLA-E041\].*seeds 0, 1 of sla"):
        rows_by_mask("sla", "vanilla", [0, 1], evaluations, "cats_accuracy", 10, different.__getitem__)


def test_the_strata_come_from_the_models_own_parse_and_mask(tiny_bert, tmp_path):
    parser = parser_pipeline()
    dev = DocBin(docs=[parser.make_doc(SHORT), parser.make_doc(LONG)])
    dev.to_disk(tmp_path / "dev.spacy")
    for threshold, expected in ((1, [False, True]), (100, [False, False])):
        # two words see each other through the neighbour rule; at m = 1 no query of 17 tokens sees
        # all of them, at m = 100 every one does (the sentence is one tree)
        model_dir = tmp_path / f"m{threshold}"
        nlp = add_sla(parser_pipeline(), tiny_bert, mask={"@misc": "spacy-sla.syntax_mask.v1", "threshold": threshold})
        nlp.to_disk(model_dir)
        assert restricted_documents(model_dir, tmp_path / "dev.spacy") == expected
        assert kept_strata(model_dir, tmp_path / "dev.spacy", model_dir) == expected
        assert json.loads((model_dir / STRATA_FILE).read_text())["restricted"] == expected


def test_a_model_without_a_local_mask_is_a_coded_error(tmp_path):
    nlp = parser_pipeline()
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[nlp.make_doc(SHORT)]).to_disk(tmp_path / "dev.spacy")
    with pytest.raises(ValueError, match=r"\[SLA-E040\].*no syntax-aware transformer"):
        restricted_documents(tmp_path / "model", tmp_path / "dev.spacy")
