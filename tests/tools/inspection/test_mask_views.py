"""mask_views on hand-built Docs: the token and wordpiece masks a model
uses, as MaskViews, heatmaps and one self-contained HTML page."""
from pathlib import Path

import numpy
import pytest
from matplotlib.image import imread
from spacy.tokens import Doc

from spacy_sla.syntax.builders import BuilderKind
from spacy_sla.tools.inspection.mask_views import MaskView, mask_html, plot_masks, token_mask, wordpiece_masks
from spacy_sla.tools.inspection.trained_pipeline import InspectionError

from util import SLA_ARCHITECTURE, sla_nlp, the_cat_sat

WINDOW_1 = {"mask": {"@misc": "spacy-sla.window_mask.v1", "window": 1, "punct_rule": "none"}}
DISTANCE = {"mask": {"@misc": "spacy-sla.tree_distance_bias.v1", "max_distance": 3}}


def model_of(nlp):
    return nlp.get_pipe("sla_transformer").model


def test_the_token_mask_is_the_builders_matrix_with_the_words(tiny_bert):
    nlp = sla_nlp(tiny_bert, **WINDOW_1)
    doc = the_cat_sat(nlp.vocab)
    view = token_mask(doc, model_of(nlp))
    assert view.labels == ["The", "cat", "sat", "on", "the", "mat", "."]
    positions = numpy.arange(7)
    numpy.testing.assert_array_equal(view.matrix, numpy.abs(positions[:, None] - positions[None, :]) <= 1)
    assert (view.kind, view.legend) == (BuilderKind.MASK, "dark: visible to the local branch")
    assert view.title.startswith("WindowMask(window=1") and view.title.endswith(", tokens")


def test_a_distance_builder_gives_buckets_with_their_legend(tiny_bert):
    nlp = sla_nlp(tiny_bert, **DISTANCE)
    doc = the_cat_sat(nlp.vocab)
    view = token_mask(doc, model_of(nlp))
    assert view.kind is BuilderKind.DISTANCE
    assert view.legend == "tree-distance bucket: 0-3 hops, 4 farther or another sentence"
    # The -> cat -> sat: two hops; The -> the: The-cat-sat-on-mat-the, five hops, past the last bucket
    assert (view.matrix[0, 1], view.matrix[0, 2], view.matrix[0, 4], view.matrix[2, 2]) == (1, 2, 4, 0)
    (pieces,) = wordpiece_masks(doc, model_of(nlp))
    assert pieces.legend.endswith(", 5 special piece")


def test_the_wordpiece_masks_are_the_matrices_the_model_uses(tiny_bert):
    nlp = sla_nlp(tiny_bert)
    doc = the_cat_sat(nlp.vocab)
    model = model_of(nlp)
    (view,) = wordpiece_masks(doc, model)
    numpy.testing.assert_array_equal(view.matrix, model.local_masks([doc])[0])
    assert view.labels[0] == "[CLS]" and view.labels[-1] == "[SEP]"
    assert len(view.labels) == view.matrix.shape[0] == view.matrix.shape[1]
    assert view.title.endswith("wordpieces of tokens 0 to 6")


def test_what_cannot_be_drawn_is_an_inspection_error(tiny_bert):
    nlp = sla_nlp(tiny_bert)
    unparsed = Doc(nlp.vocab, words=["No", "parse", "here"])
    with pytest.raises(InspectionError, match="no dependency parse"):
        token_mask(unparsed, model_of(nlp))
    with pytest.raises(InspectionError, match="no dependency parse"):
        wordpiece_masks(unparsed, model_of(nlp))
    spans = {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96}
    sgnet = sla_nlp(tiny_bert, **{"@architectures": SLA_ARCHITECTURE, "get_spans": spans, "mask": None,
                                  "ancestor_mask": {"@misc": "spacy-sla.ancestor_mask.v1"}})
    with pytest.raises(InspectionError, match="no local mask builder"):
        token_mask(the_cat_sat(sgnet.vocab), model_of(sgnet))


def test_the_html_page_has_one_dark_cell_per_visible_pair_and_escapes_the_labels():
    view = MaskView("a <title>", ["a", "<b>", "c"], numpy.array([[1, 0, 0], [1, 1, 0], [0, 1, 1]], dtype=bool),
                    "mask", "dark: visible")
    page = mask_html("a <b> c", "<svg class='displacy'></svg>", [view])
    assert page.count('style="background:#333"') == 5 and page.count('style="background:#fff"') == 4
    assert '<th class="query">&lt;b&gt;</th>' in page and "<h2>a &lt;title&gt;</h2>" in page
    assert "<svg class='displacy'></svg>" in page
    assert "<script" not in page and "src=" not in page


def test_the_distance_cells_carry_their_bucket():
    view = MaskView("buckets", ["x", "y"], numpy.array([[0, 4], [4, 0]]), BuilderKind.DISTANCE, "tree-distance bucket")
    page = mask_html("x y", "", [view])
    assert page.count(">4</td>") == 2 and page.count(">0</td>") == 2


def test_the_heatmaps_have_one_panel_per_view(tmp_path: Path):
    views = [MaskView(f"view {i}", ["a", "b", "c"], numpy.eye(3, dtype=bool), BuilderKind.MASK, "dark") for i in range(2)]
    one, two = tmp_path / "one.png", tmp_path / "sub" / "two.png"
    plot_masks(views[:1], one)
    plot_masks(views, two)
    height_one, height_two = imread(one).shape[0], imread(two).shape[0]
    assert height_two == pytest.approx(2 * height_one, rel=0.05)
    assert imread(two).std() > 0
