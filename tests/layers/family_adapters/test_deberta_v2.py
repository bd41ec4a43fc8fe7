"""DebertaV2StyleSelfAttention: DeBERTa-v3's disentangled position terms
are the score bias of both branches; heads that do not span the hidden size
are refused."""
import pytest
from transformers import DebertaV2Config, DebertaV2Model

from spacy_sla.layers import SyntaxAwareTransformer

from .position_terms import position_term_tests
from util import ENCODER_SIZES

FAMILIES = ["deberta-v2"]


(
    test_with_its_position_term_prediction_gives_the_plain_output_and_the_references,
    test_training_gives_the_references_gradients_with_its_position_term,
    test_a_training_step_changes_the_gates_and_the_position_tables,
) = position_term_tests(FAMILIES)


def test_deberta_heads_that_do_not_span_the_hidden_size_are_refused():
    config = DebertaV2Config(hidden_size=32, attention_head_size=4, **ENCODER_SIZES)
    with pytest.raises(ValueError, match=r"\[SLA-E009\].*attention_head_size 4\) do not span its hidden_size 32"):
        SyntaxAwareTransformer(DebertaV2Model(config))
