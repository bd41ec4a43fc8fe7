"""A saved encoder config checked against the names and shapes of its saved
weights before anything is built, its dtype, and a tokenizer against the
embedding table (the pipelines that carry them: test_hf_shim.py)."""
import warnings

import pytest
import torch
from transformers import AlbertConfig, BertConfig, DistilBertConfig, ElectraConfig

from spacy_sla.layers.saved_config import check_config_sizes, check_token_ids, in_saved_dtype, model_dtype


def bert_state(n_layers: int = 2, vocab: int = 50, width: int = 32, positions: int = 64) -> dict:
    state = {"transformer.embeddings.word_embeddings.weight": torch.zeros(vocab, width),
             "transformer.embeddings.position_embeddings.weight": torch.zeros(positions, width)}
    for index in range(n_layers):
        state[f"transformer.encoder.layer.{index}.attention.self.query.weight"] = torch.zeros(width, width)
    return state


def bert(**sizes) -> BertConfig:
    settings = dict(num_hidden_layers=2, vocab_size=50, hidden_size=32, num_attention_heads=4,
                    max_position_embeddings=64)
    return BertConfig(**{**settings, **sizes})


def test_a_config_that_fits_its_weights_passes():
    check_config_sizes(bert(), bert_state())


@pytest.mark.parametrize("sizes,message", [
    ({"num_hidden_layers": 4000}, r"num_hidden_layers = 4000, where its saved weights hold 2 layer\(s\) in its "
                                  r"longest list of layers"),
    ({"num_hidden_layers": 0}, r"num_hidden_layers = 0"),
    ({"vocab_size": 4_000_000}, r"vocab_size = 4000000, where its saved weights hold 50 in the shape of its word "
                                r"embeddings"),
    ({"max_position_embeddings": 40_000}, r"max_position_embeddings = 40000, where its saved weights hold 64 in the "
                                          r"shape of its position embeddings"),
])
def test_sizes_beyond_the_saved_weights_are_refused(sizes, message):
    with pytest.raises(ValueError, match=r"\[SLA-E122\] The SLA transformer's saved model config sets " + message):
        check_config_sizes(bert(**sizes), bert_state())


def test_a_width_beyond_the_embeddings_is_refused():
    with pytest.raises(ValueError, match=r"\[SLA-E122\].*hidden_size = 64, where its saved weights hold 32"):
        check_config_sizes(bert(hidden_size=64), bert_state())


def test_layers_are_bounded_even_where_no_weight_of_a_layer_is_saved():
    """An empty state makes one layer at most on the meta device, where the
    missing weights are [SLA-E092]."""
    check_config_sizes(bert(num_hidden_layers=1), {})
    with pytest.raises(ValueError, match=r"\[SLA-E122\].*num_hidden_layers = 3, where its saved weights hold 0 "):
        check_config_sizes(bert(num_hidden_layers=3), {})


def test_distilbert_sinusoidal_positions_need_their_saved_table():
    config = DistilBertConfig(n_layers=1, dim=32, n_heads=4, hidden_dim=48, vocab_size=50,
                              max_position_embeddings=40_000, sinusoidal_pos_embds=True)
    state = {"transformer.transformer.layer.0.attention.q_lin.weight": torch.zeros(32, 32)}
    with pytest.raises(ValueError, match=r"\[SLA-E122\].*sinusoidal_pos_embds = True, where its saved weights hold "
                                         r"no position embeddings"):
        check_config_sizes(config, state)
    state["transformer.embeddings.position_embeddings.weight"] = torch.zeros(64, 32)
    with pytest.raises(ValueError, match=r"\[SLA-E122\].*max_position_embeddings = 40000, where its saved weights "
                                         r"hold 64"):
        check_config_sizes(config, state)


def test_albert_counts_its_layer_groups_and_the_embedding_width():
    """ALBERT runs one shared layer num_hidden_layers times: its groups make
    the modules; its embeddings are embedding_size wide."""
    config = AlbertConfig(num_hidden_layers=12, num_hidden_groups=1, inner_group_num=1, embedding_size=16,
                          hidden_size=32, num_attention_heads=4, vocab_size=50, max_position_embeddings=64)
    state = {"transformer.embeddings.word_embeddings.weight": torch.zeros(50, 16),
             "transformer.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight": torch.zeros(32, 32)}
    check_config_sizes(config, state)
    config.inner_group_num = 400
    with pytest.raises(ValueError, match=r"\[SLA-E122\].*inner_group_num = 400, where its saved weights hold 1 "):
        check_config_sizes(config, state)


def test_electra_embeddings_are_compared_with_their_own_width():
    config = ElectraConfig(num_hidden_layers=1, embedding_size=16, hidden_size=32, num_attention_heads=4,
                           vocab_size=50)
    with pytest.raises(ValueError, match=r"\[SLA-E122\].*embedding_size = 16, where its saved weights hold 32"):
        check_config_sizes(config, {"transformer.embeddings.word_embeddings.weight": torch.zeros(50, 32)})


def test_an_unknown_model_type_is_refused_before_its_sizes():
    config = bert()
    config.model_type = "gpt2"
    with pytest.raises(ValueError, match=r"\[SLA-E002\]"):
        check_config_sizes(config, bert_state())


def test_the_saved_weights_decide_the_dtype():
    assert model_dtype({"a": torch.zeros(1), "b": torch.zeros(1, dtype=torch.int64)}) == torch.float32
    assert model_dtype({"a": torch.zeros(1, dtype=torch.float16)}) == torch.float32
    assert model_dtype({"a": torch.zeros(1, dtype=torch.float64)}) == torch.float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert in_saved_dtype({"torch_dtype": "float32"}, {"a": torch.zeros(1)})["torch_dtype"] == "float32"
        assert in_saved_dtype({}, {"a": torch.zeros(1)})["torch_dtype"] == "float32"


@pytest.mark.parametrize("saved", ["float16", "bfloat16", "float64"])
def test_another_float_torch_dtype_is_ignored_with_a_warning(saved):
    with pytest.warns(UserWarning, match=rf"\[SLA-W014\].*torch_dtype = \"{saved}\", and its saved weights are "
                                         r"built as float32"):
        config = in_saved_dtype({"torch_dtype": saved, "model_type": "bert"}, {"a": torch.zeros(1)})
    assert config == {"torch_dtype": "float32", "model_type": "bert"}


@pytest.mark.parametrize("value", ["int8", "load", "garbage", 3, ["float32"]])
def test_a_torch_dtype_that_is_no_float_type_is_refused(value):
    with pytest.raises(ValueError, match=r"\[SLA-E125\].*torch_dtype = .*which is no floating-point type "
                                         r"\(float16, bfloat16, float32, float64\)"):
        in_saved_dtype({"torch_dtype": value}, {"a": torch.zeros(1)})


class Tokenizer:
    def __init__(self, vocabulary: dict):
        self.vocabulary = vocabulary

    def get_vocab(self) -> dict:
        return self.vocabulary


def test_token_ids_beyond_the_embedding_rows_are_refused():
    check_token_ids(Tokenizer({"[PAD]": 0, "cat": 49}), 50)
    with pytest.raises(ValueError, match=r"\[SLA-E126\].*token ids up to 70000, and its embedding table has 50 rows: "
                                         r"2 token\(s\) \('cat', 'dog'\)"):
        check_token_ids(Tokenizer({"[PAD]": 0, "cat": 50, "dog": 70_000}), 50)
