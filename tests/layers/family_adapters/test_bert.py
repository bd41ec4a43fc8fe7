"""BertStyleSelfAttention (BERT, RoBERTa, XLM-RoBERTa, CamemBERT, ELECTRA):
the relative-key term of BERT's scores, and its position terms through
both branches (position_terms.py)."""
import torch

from spacy_sla.layers.family_adapters import relative_key_scores

from .position_terms import position_term_tests

FAMILIES = ["bert-relative_key", "bert-relative_key_query"]


def test_the_relative_key_term_follows_its_definition():
    generator = torch.Generator().manual_seed(0)
    query, key = torch.randn(1, 2, 4, 3, generator=generator), torch.randn(1, 2, 4, 3, generator=generator)
    table = torch.nn.Embedding(2 * 5 - 1, 3)
    for kind in ("relative_key", "relative_key_query"):
        with torch.no_grad():
            scores = relative_key_scores(query, key, table, 5, kind)
        for i in range(4):
            for j in range(4):
                distance = table.weight[i - j + 5 - 1]
                expected = query[0, :, i] @ distance + (key[0, :, j] @ distance if kind == "relative_key_query" else 0.0)
                assert torch.allclose(scores[0, :, i, j], expected, atol=1e-6), (kind, i, j)


(
    test_with_its_position_term_prediction_gives_the_plain_output_and_the_references,
    test_training_gives_the_references_gradients_with_its_position_term,
    test_a_training_step_changes_the_gates_and_the_position_tables,
) = position_term_tests(FAMILIES)
