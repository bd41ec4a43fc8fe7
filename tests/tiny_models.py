"""Tiny random transformers with a toy WordPiece vocabulary, saved to a
directory and loaded by path: the tests never reach the Hugging Face hub."""
import string
from pathlib import Path
from typing import List, Sequence

SPECIAL_PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "the", "a", "cat", "dog", "sat", "on", "mat", "and", "ran", "big", "saw",
    "she", "he", "it", "is", "was", "do", "don", "can", "not", "walk",
    "##ing", "##ed", "##s", "abc",
]


def toy_vocab(extra_pieces: Sequence[str] = ()) -> List[str]:
    characters = list(string.ascii_lowercase + string.digits + string.punctuation)
    continuations = ["##" + c for c in string.ascii_lowercase + string.digits]
    vocab = SPECIAL_PIECES + characters + continuations
    for piece in [*WORDS, *extra_pieces]:
        if piece not in vocab:
            vocab.append(piece)
    return vocab


def save_tiny_model(
    path: Path,
    model_type: str = "bert",
    hidden_size: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    max_length: int = 64,
    seed: int = 0,
    extra_pieces: Sequence[str] = (),
) -> Path:
    """Save a randomly initialised encoder of the given family (bert,
    distilbert, electra) with a lowercasing WordPiece tokenizer to path;
    extra_pieces join the toy vocabulary (e.g. the characters of another
    script, which BERT's tokenizer splits one by one)."""
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
    vocab = toy_vocab(extra_pieces)
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf8")
    torch.manual_seed(seed)
    common = dict(vocab_size=len(vocab), max_position_embeddings=max_length)
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


XLMR_TEXT = ["the cat sat on the mat", "der hund lief", "a dog ran on it", "she saw the big cat"]


def save_tiny_xlmr(path: Path, sentencepiece_file: bool = True) -> Path:
    """Save a randomly initialised XLM-R encoder with a toy Unigram
    tokenizer to path: with sentencepiece_file, the SentencePiece model file
    its slow tokenizer reads (sentencepiece.bpe.model; building it needs the
    sentencepiece library), else tokenizer.json alone, as some hub copies
    of such models have."""
    from transformers import XLMRobertaConfig, XLMRobertaModel

    path.mkdir(parents=True, exist_ok=True)
    tokenizer = _spm_tokenizer(path) if sentencepiece_file else _unigram_tokenizer()
    tokenizer.save_pretrained(path)
    config = XLMRobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=64, max_position_embeddings=80, pad_token_id=1)
    XLMRobertaModel(config).save_pretrained(path)
    return path


def _spm_tokenizer(path: Path):
    import io

    import sentencepiece
    from transformers import XLMRobertaTokenizer

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(XLMR_TEXT * 20), model_writer=model, vocab_size=40, model_type="unigram",
        bos_id=0, pad_id=1, eos_id=2, unk_id=3, hard_vocab_limit=False, minloglevel=2,
    )
    (path / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    return XLMRobertaTokenizer(vocab_file=str(path / "sentencepiece.bpe.model"), model_max_length=64)


def _unigram_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import XLMRobertaTokenizerFast

    words = sorted({word for text in XLMR_TEXT for word in text.split()})
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces += [(f"\u2581{word}", -1.0) for word in words] + [(c, -5.0) for c in string.ascii_lowercase]
    pieces += [("\u2581", -2.0), ("<mask>", 0.0)]
    backend = Tokenizer(models.Unigram(pieces, unk_id=3))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Metaspace()
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return XLMRobertaTokenizerFast(tokenizer_object=backend, model_max_length=64)
