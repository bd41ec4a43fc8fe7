"""Tiny random transformers with a toy WordPiece vocabulary (or, for the
SentencePiece families, a unigram model trained on the toy words), saved to
a directory and loaded by path: the tests never reach the Hugging Face hub."""
import string
from pathlib import Path
from typing import List, Optional, Sequence

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


# MPNet's embeddings take id 1 for padding (their position ids count the
# other pieces), so its vocabulary starts like the pretrained one's.
MPNET_SPECIAL_PIECES = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
SENTENCEPIECE_CONTROL_PIECES = ["[CLS]", "[SEP]", "[MASK]"]


# DeBERTa-v3's attention settings, with fewer position buckets
DEBERTA_V3 = dict(
    relative_attention=True,
    pos_att_type=["p2c", "c2p"],
    position_buckets=8,
    max_relative_positions=-1,
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
    type_vocab_size=0,
)


def mpnet_vocab() -> List[str]:
    return MPNET_SPECIAL_PIECES + toy_vocab()[len(SPECIAL_PIECES):]


def save_sentencepiece_model(path: Path) -> Path:
    """A unigram SentencePiece model of the toy words and characters, with
    ALBERT's and DeBERTa-v2's ids: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3,
    [MASK] 4 (needs the sentencepiece package)."""
    import sentencepiece

    words = WORDS[:21] + ["walking", "walked", "cats", "dogs", "abc"]
    characters = " ".join(string.punctuation + string.digits + string.ascii_uppercase)
    lines = [" ".join(words[i:] + words[:i]) + " " + characters for i in range(len(words))]
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines * 10),
        model_prefix=str(path / "spiece"),
        vocab_size=150,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=SENTENCEPIECE_CONTROL_PIECES,
        hard_vocab_limit=False,
        character_coverage=1.0,
        minloglevel=2,
    )
    return path / "spiece.model"


def save_tiny_model(
    path: Path,
    model_type: str = "bert",
    hidden_size: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    max_length: int = 64,
    seed: int = 0,
    extra_pieces: Sequence[str] = (),
    position_embedding_type: Optional[str] = None,
) -> Path:
    """Save a randomly initialised encoder of the given family (bert,
    distilbert, electra, mpnet with a lowercasing WordPiece tokenizer;
    modernbert with a window of 2 pieces either side in every other layer,
    and BERT's tokenizer; albert, and deberta-v2 configured as DeBERTa-v3,
    with a SentencePiece one) to path. extra_pieces join the toy WordPiece
    vocabulary (e.g. the characters of another script, which BERT's
    tokenizer splits one by one); position_embedding_type: BERT's (absolute
    when None)."""
    import torch
    from transformers import (
        AlbertConfig,
        AlbertModel,
        AlbertTokenizerFast,
        BertConfig,
        BertModel,
        BertTokenizerFast,
        DebertaV2Config,
        DebertaV2Model,
        DebertaV2TokenizerFast,
        DistilBertConfig,
        DistilBertModel,
        DistilBertTokenizerFast,
        ElectraConfig,
        ElectraModel,
        ElectraTokenizerFast,
        MPNetConfig,
        MPNetModel,
        MPNetTokenizerFast,
    )

    path.mkdir(parents=True, exist_ok=True)
    vocab = mpnet_vocab() if model_type == "mpnet" else toy_vocab(extra_pieces)
    vocab_file = path / "vocab.txt"
    torch.manual_seed(seed)
    common = dict(vocab_size=len(vocab), max_position_embeddings=max_length)
    sizes = dict(num_hidden_layers=n_layers, num_attention_heads=n_heads, intermediate_size=2 * hidden_size)
    if model_type == "albert":
        vocab_file = save_sentencepiece_model(path)
        tokenizer = AlbertTokenizerFast(vocab_file=str(vocab_file), model_max_length=max_length)
        config = AlbertConfig(
            embedding_size=hidden_size // 2, hidden_size=hidden_size, vocab_size=len(tokenizer),
            max_position_embeddings=max_length, **sizes,
        )
        AlbertModel(config).save_pretrained(path)
        tokenizer.save_pretrained(path)
        return path
    if model_type == "deberta-v2":
        vocab_file = save_sentencepiece_model(path)
        tokenizer = DebertaV2TokenizerFast(
            vocab_file=str(vocab_file), pad_token="<pad>", unk_token="<unk>", model_max_length=max_length
        )
        config = DebertaV2Config(
            hidden_size=hidden_size, vocab_size=len(tokenizer), max_position_embeddings=max_length, **DEBERTA_V3, **sizes
        )
        DebertaV2Model(config).save_pretrained(path)
        tokenizer.save_pretrained(path)
        return path
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf8")
    tokenizer_options = {}
    if model_type == "bert":
        config = BertConfig(
            hidden_size=hidden_size,
            position_embedding_type=position_embedding_type or "absolute",
            **sizes,
            **common,
        )
        model, tokenizer_cls = BertModel(config), BertTokenizerFast
    elif model_type == "mpnet":
        # position ids start after the padding id
        config = MPNetConfig(hidden_size=hidden_size, vocab_size=len(vocab), max_position_embeddings=max_length + 2, **sizes)
        model, tokenizer_cls = MPNetModel(config), MPNetTokenizerFast
        # the vocabulary's own unknown piece: MPNet's default "[UNK]" would be
        # added past the embedding rows ([SLA-E126] when a pipeline loads)
        tokenizer_options = {"unk_token": "<unk>"}
    elif model_type == "modernbert":
        # (transformers has ModernBERT from 4.48 on; the floors' tests do without it)
        from transformers import ModernBertConfig, ModernBertModel

        # the toy WordPiece vocabulary's ids; ModernBERT takes no token type ids
        # (its BPE tokenizer is not built offline, the model only needs ids)
        config = ModernBertConfig(
            hidden_size=hidden_size, local_attention=4, global_attn_every_n_layers=2,
            pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3, **sizes, **common,
        )
        model, tokenizer_cls = ModernBertModel(config), BertTokenizerFast
        tokenizer_options = {"model_input_names": ["input_ids", "attention_mask"]}
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
    tokenizer = tokenizer_cls(vocab_file=str(vocab_file), do_lower_case=True, model_max_length=max_length, **tokenizer_options)
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
