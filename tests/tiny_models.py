"""Tiny random transformers with a toy WordPiece vocabulary, saved to a
directory and loaded by path: the tests never reach the Hugging Face hub."""
import string
from pathlib import Path
from typing import List

SPECIAL_PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "and", "ran", "big", "saw",
    "she", "he", "it", "is", "was", "do", "don", "can", "not", "walk",
    "##ing", "##ed", "##s", "abc",
]


def toy_vocab() -> List[str]:
    characters = list(string.ascii_lowercase + string.digits + string.punctuation)
    continuations = ["##" + c for c in string.ascii_lowercase + string.digits]
    vocab = SPECIAL_PIECES + characters + continuations
    vocab += [word for word in WORDS if word not in vocab]
    return vocab


def save_tiny_model(
    path: Path,
    model_type: str = "bert",
    hidden_size: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    max_length: int = 64,
    seed: int = 0,
) -> Path:
    """Save a randomly initialised encoder of the given family (bert,
    distilbert, electra) with a lowercasing WordPiece tokenizer to path."""
    import torch
    from transformers import (
        BertConfig,
        BertModel,
        BertTokenizerFast,
        DistilBertConfig,
        DistilBertModel,
        DistilBertTokenizerFast,
        ElectraConfig,
        ElectraModel,
        ElectraTokenizerFast,
    )

    path.mkdir(parents=True, exist_ok=True)
    vocab_file = path / "vocab.txt"
    vocab_file.write_text("\n".join(toy_vocab()) + "\n", encoding="utf8")
    torch.manual_seed(seed)
    common = dict(vocab_size=len(toy_vocab()), max_position_embeddings=max_length)
    if model_type == "bert":
        config = BertConfig(
            hidden_size=hidden_size,
            num_hidden_layers=n_layers,
            num_attention_heads=n_heads,
            intermediate_size=2 * hidden_size,
            **common,
        )
        model, tokenizer_cls = BertModel(config), BertTokenizerFast
    elif model_type == "electra":
        config = ElectraConfig(
            embedding_size=hidden_size,
            hidden_size=hidden_size,
            num_hidden_layers=n_layers,
            num_attention_heads=n_heads,
            intermediate_size=2 * hidden_size,
            **common,
        )
        model, tokenizer_cls = ElectraModel(config), ElectraTokenizerFast
    elif model_type == "distilbert":
        config = DistilBertConfig(
            dim=hidden_size, n_layers=n_layers, n_heads=n_heads, hidden_dim=2 * hidden_size, **common
        )
        model, tokenizer_cls = DistilBertModel(config), DistilBertTokenizerFast
    else:
        raise ValueError(f"No tiny model of type {model_type}")
    model.save_pretrained(path)
    tokenizer = tokenizer_cls(vocab_file=str(vocab_file), do_lower_case=True, model_max_length=max_length)
    tokenizer.save_pretrained(path)
    return path
