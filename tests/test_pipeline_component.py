import os
import re

import numpy
import pytest
import spacy
import torch
from layers.file_reads import opened_files
from spacy.tokens import Doc
from spacy.training import Example

from spacy_sla import SLATransformer
from spacy_sla.layers import SyntaxAwareTransformer

from util import (
    add_tagger_listener,
    add_textcat_listener,
    english_vocab,
    parsed_doc,
    plain_nlp,
    sla_nlp,
    the_cat_sat,
    trf_output,
)

HIDE_MOST = {"mask": {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 0, "punct_rule": "none"}}


def odd_docs(vocab):
    """Parsed Docs with the inputs that tend to break alignment code."""
    whitespace = parsed_doc(vocab, ["a", "  ", "cat", "\n", "sat"], [2, 2, 4, 4, 4])
    emoji = parsed_doc(vocab, ["she", "saw", "😀", "and", "ran"], [1, 1, 1, 4, 1])
    shared_piece = Doc(
        vocab, words=["she", "do", "n't"], spaces=[True, False, False], heads=[1, 1, 1], deps=["nsubj", "ROOT", "neg"]
    )
    two_sentences = Doc.from_docs([the_cat_sat(vocab), the_cat_sat(vocab)])
    long_doc = Doc.from_docs([the_cat_sat(vocab) for _ in range(30)])  # 210 tokens, 30 sentences
    empty = Doc(vocab, words=[])
    return [whitespace, emoji, shared_piece, two_sentences, long_doc, empty]


def test_factory_declares_what_it_requires_and_assigns(tiny_bert):
    nlp = sla_nlp(tiny_bert, initialize=False)
    meta = nlp.get_pipe_meta("sla_transformer")
    assert meta.assigns == ["doc._.trf_data"]
    assert set(meta.requires) == {"token.head", "token.dep"}
    assert isinstance(nlp.get_pipe("sla_transformer"), SLATransformer)


def test_initialize_runs_on_the_unparsed_dummy_doc(tiny_bert):
    nlp = sla_nlp(tiny_bert)
    model = nlp.get_pipe("sla_transformer").model
    assert model.get_dim("nO") == 32
    assert isinstance(model.transformer, SyntaxAwareTransformer)
    assert len(model.transformer.sla_modules()) == 2


@pytest.mark.parametrize(
    "mask,doc_indices",
    [
        # a threshold larger than any sentence hides nothing within a sentence
        ({"@misc": "spacy-sla.syntax_mask.v1", "threshold": 1000, "punct_rule": "none"}, [0, 1, 2]),
        # a window wider than the Doc hides nothing at all
        ({"@misc": "spacy-sla.window_mask.v1", "window": 1000, "punct_rule": "none"}, [0, 1, 2, 3, 4]),
    ],
)
def test_a_hide_nothing_mask_equals_the_plain_transformer_component(tiny_bert, mask, doc_indices):
    sla = sla_nlp(tiny_bert, mask=mask)
    plain = plain_nlp(tiny_bert)
    docs = odd_docs(english_vocab())
    for doc in [docs[i] for i in doc_indices]:
        expected = plain(plain.make_doc(doc.text))
        got = sla(doc)
        assert got._.trf_data.wordpieces.strings == expected._.trf_data.wordpieces.strings
        real = got._.trf_data.wordpieces.attention_mask[..., None].astype(bool)
        numpy.testing.assert_allclose(trf_output(got) * real, trf_output(expected) * real, atol=2e-5)


def test_a_small_threshold_changes_the_output(tiny_bert):
    hide_most = sla_nlp(tiny_bert, **HIDE_MOST)
    plain = plain_nlp(tiny_bert)
    doc = hide_most(the_cat_sat(english_vocab()))
    expected = plain(plain.make_doc(doc.text))
    assert numpy.abs(trf_output(doc) - trf_output(expected)).max() > 1e-3


def test_odd_docs_get_transformer_data_for_every_token(tiny_bert):
    nlp = sla_nlp(tiny_bert, get_spans={"@span_getters": "spacy-transformers.strided_spans.v1", "window": 40, "stride": 30})
    docs = list(nlp.pipe(odd_docs(english_vocab()), batch_size=3))
    for doc in docs:
        assert doc._.trf_data.align.lengths.shape == (len(doc),)
    long_doc = docs[4]
    assert len(long_doc._.trf_data.wordpieces.strings) == 7  # 210 tokens in windows of 40, stride 30
    assert trf_output(long_doc).shape[1] <= 64  # the tiny model's maximum length
    # whitespace tokens have no wordpieces; every other token has some
    whitespace = docs[0]
    assert whitespace._.trf_data.align.lengths.tolist() == [1, 0, 1, 0, 1]
    # an empty Doc gets empty transformer data, alone or in a batch
    assert docs[5]._.trf_data.tensors == () and docs[5]._.trf_data.wordpieces.strings == []
    alone = nlp(Doc(english_vocab(), words=[]))
    assert alone._.trf_data.tensors == () or alone._.trf_data.tensors[0].size == 0


def test_spans_longer_than_the_model_are_truncated(tiny_bert):
    nlp = sla_nlp(tiny_bert)  # default windows of 128 tokens > 64 wordpieces
    long_doc = Doc.from_docs([the_cat_sat(english_vocab()) for _ in range(20)])
    doc = nlp(long_doc)
    assert trf_output(doc).shape == (2, 64, 32)
    masks = nlp.get_pipe("sla_transformer").local_masks([long_doc])
    assert [m.shape for m in masks] == [(64, 64), (64, 64)]


def test_local_masks_follow_the_model_spans(tiny_bert):
    nlp = sla_nlp(tiny_bert, get_spans={"@span_getters": "spacy-transformers.strided_spans.v1", "window": 10, "stride": 7}, **HIDE_MOST)
    docs = [the_cat_sat(english_vocab()), Doc.from_docs([the_cat_sat(english_vocab())] * 2)]
    masks = nlp.get_pipe("sla_transformer").local_masks(docs)
    processed = [nlp(doc) for doc in docs]
    lengths = [length for doc in processed for length in doc._.trf_data.wordpieces.lengths]
    assert [m.shape for m in masks] == [(n, n) for n in lengths]
    # the first span: [CLS] the cat sat on the mat . [SEP], threshold 0
    expected = numpy.ones((9, 9), dtype=bool)
    expected[1:-1, 1:-1] = numpy.abs(numpy.subtract.outer(numpy.arange(7), numpy.arange(7))) <= 1
    assert (masks[0] == expected).all()


def test_unparsed_docs_get_a_coded_error(tiny_bert):
    nlp = sla_nlp(tiny_bert)
    with pytest.raises(ValueError, match=r"\[SLA-E001\].*parser.*annotating_components"):
        nlp("This text has no parse.")


def test_e001_in_pipe_names_the_doc_by_its_place_in_the_stream_and_its_text(tiny_bert):
    nlp = sla_nlp(tiny_bert)
    vocab = nlp.vocab
    docs = [the_cat_sat(vocab), the_cat_sat(vocab), Doc(vocab, words="Nobody parsed this one".split())]
    with pytest.raises(ValueError, match=r"\[SLA-E001\].*Doc 2 of the stream given to pipe, counting from 0, text 'Nobody parsed this one"):
        list(nlp.pipe(docs, batch_size=2))


def test_pipe_hands_an_unparsed_doc_to_the_error_handler_and_processes_the_others(tiny_bert):
    nlp = sla_nlp(tiny_bert)
    handled = []
    nlp.set_error_handler(lambda name, component, docs, error: handled.append((name, [d.text for d in docs], str(error))))
    unparsed = Doc(nlp.vocab, words="Nobody parsed this one".split())
    docs = [the_cat_sat(nlp.vocab), unparsed, the_cat_sat(nlp.vocab)]
    processed = list(nlp.pipe(docs, batch_size=8))
    assert [doc.text for doc in processed] == [docs[0].text, docs[2].text]
    assert all(doc._.trf_data.tensors[0].shape[0] > 0 for doc in processed)
    ((name, texts, error),) = handled
    assert (name, texts) == ("sla_transformer", [unparsed.text])
    assert error.startswith("[SLA-E001]") and "Doc 1 of the stream" in error


def test_unparsed_docs_fall_back_to_global_attention_when_asked(tiny_bert):
    nlp = sla_nlp(tiny_bert, on_missing_parse="global", **HIDE_MOST)
    plain = plain_nlp(tiny_bert)
    with pytest.warns(UserWarning, match=r"\[SLA-W001\]"):
        doc = nlp("the cat sat on the mat")
    expected = plain("the cat sat on the mat")
    numpy.testing.assert_allclose(trf_output(doc), trf_output(expected), atol=2e-5)


def test_the_window_mask_needs_no_parse(tiny_bert):
    nlp = sla_nlp(tiny_bert, mask={"@misc": "spacy-sla.window_mask.v1", "window": 1, "punct_rule": "none"})
    doc = nlp("the cat sat on the mat")
    mask = nlp.get_pipe("sla_transformer").local_masks([doc])[0]
    assert mask[1:-1, 1:-1].sum() == 6 + 2 * 5


def train_steps(nlp, examples, n_steps, optimizer=None):
    if optimizer is None:
        optimizer = nlp.initialize(lambda: examples)
    losses = []
    for _ in range(n_steps):
        step_losses = {}
        nlp.update(examples, sgd=optimizer, losses=step_losses)
        losses.append(step_losses)
    return losses


def test_listeners_train_through_the_sla_transformer(tiny_bert):
    torch.manual_seed(0)
    nlp = sla_nlp(tiny_bert, initialize=False)
    add_textcat_listener(nlp)
    vocab = nlp.vocab
    docs = [the_cat_sat(vocab), parsed_doc(vocab, ["she", "ran"], [1, 1])]
    examples = [
        Example.from_dict(docs[0], {"cats": {"POS": 1.0, "NEG": 0.0}}),
        Example.from_dict(docs[1], {"cats": {"POS": 0.0, "NEG": 1.0}}),
    ]
    optimizer = nlp.initialize(lambda: examples)
    sla_modules = nlp.get_pipe("sla_transformer").model.transformer.sla_modules()
    gates_before = [m.gate.weight.detach().clone() for m in sla_modules]
    losses = train_steps(nlp, examples, 12, optimizer)
    assert losses[-1]["textcat"] < losses[0]["textcat"]
    gates_after = [m.gate.weight for m in sla_modules]
    assert all(not torch.equal(before, after) for before, after in zip(gates_before, gates_after))
    scores = nlp(the_cat_sat(vocab)).cats
    assert scores["POS"] > scores["NEG"]


def test_a_token_level_listener_trains_too(tiny_bert):
    torch.manual_seed(0)
    nlp = sla_nlp(tiny_bert, initialize=False)
    add_tagger_listener(nlp)
    doc = the_cat_sat(nlp.vocab)
    examples = [Example.from_dict(doc, {"tags": ["c", "c", "i", "c", "c", "i", "c"]})]
    losses = train_steps(nlp, examples, 30)
    assert losses[-1]["tagger"] < losses[0]["tagger"] / 2
    assert [t.tag_ for t in nlp(the_cat_sat(nlp.vocab))] == ["c", "c", "i", "c", "c", "i", "c"]


@pytest.mark.parametrize("family", ["tiny_distilbert", "tiny_electra", "tiny_bert_relative", "tiny_mpnet", "tiny_albert", "tiny_deberta_v3", "tiny_modernbert"])
def test_other_families_load_by_path_and_match_the_plain_component(family, request):
    path = request.getfixturevalue(family)
    sla = sla_nlp(path, mask={"@misc": "spacy-sla.window_mask.v1", "window": 1000, "punct_rule": "none"})
    plain = plain_nlp(path)
    doc = the_cat_sat(sla.vocab)
    numpy.testing.assert_allclose(trf_output(sla(doc)), trf_output(plain(plain.make_doc(doc.text))), atol=2e-5)
    hide_most = sla_nlp(path, **HIDE_MOST)
    assert numpy.abs(trf_output(hide_most(the_cat_sat(hide_most.vocab))) - trf_output(plain(plain.make_doc(doc.text)))).max() > 1e-3


@pytest.mark.parametrize("name", ["/no/such/model/dir", "./no-such-model-dir", "../no-such-model-dir", "no/such/model-dir"])
def test_a_missing_local_model_directory_gets_a_coded_error(name, tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    missing = str((tmp_path / "work" / name).resolve())
    with pytest.raises(OSError, match=rf"\[SLA-E005\] Could not load the transformer '{re.escape(name)}': "
                                      rf"the local directory {re.escape(missing)} does not exist"):
        sla_nlp(name)


def test_a_hub_name_that_cannot_be_reached_says_no_local_directory_has_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OSError, match=r"\[SLA-E005\].*nor is there a local directory .*no-such-org/no-such-model"):
        sla_nlp("no-such-org/no-such-model")


def test_a_plain_transformer_model_in_the_sla_component_gets_a_coded_error(tiny_bert):
    nlp = spacy.blank("en")
    plain_model = {
        "@architectures": "spacy-transformers.TransformerModel.v3",
        "name": str(tiny_bert),
        "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96},
    }
    with pytest.raises(ValueError, match=r"\[SLA-E086\] The component 'sla_transformer' .* 'transformer' "
                                         r"\(TransformerModel\), which is not an SLA model.*"
                                         r"spacy-sla\.SLATransformerModel\.v1 \(the settings"):
        nlp.add_pipe("sla_transformer", config={"model": plain_model})
    assert nlp.pipe_names == []


@pytest.mark.parametrize("family", ["tiny_bert_relative", "tiny_mpnet", "tiny_modernbert"])
def test_wordpiece_families_align_each_token_with_its_piece(family, request):
    nlp = sla_nlp(request.getfixturevalue(family))
    doc = nlp(the_cat_sat(nlp.vocab))
    pieces = doc._.trf_data.wordpieces.strings[0]
    assert pieces[1:-1] == ["the", "cat", "sat", "on", "the", "mat", "."]
    assert doc._.trf_data.align.lengths.tolist() == [1] * 7
    assert doc._.trf_data.align.data.ravel().tolist() == list(range(1, 8))


@pytest.mark.parametrize("family", ["tiny_albert", "tiny_deberta_v3"])
def test_sentencepiece_families_align_each_token_with_the_pieces_that_spell_it(family, request):
    nlp = sla_nlp(request.getfixturevalue(family))
    doc = nlp(the_cat_sat(nlp.vocab))
    pieces = doc._.trf_data.wordpieces.strings[0]
    assert (pieces[0], pieces[-1]) == ("[CLS]", "[SEP]")
    align = doc._.trf_data.align
    for token in doc:
        aligned = [pieces[i] for i in align[token.i].dataXd.ravel()]
        assert token.lower_ in "".join(aligned).replace("\u2581", "").lower()


# --- the component's own files: regular files inside its directory -----------------

@pytest.fixture(scope="module")
def saved_sla_pipeline(tiny_bert, tmp_path_factory):
    path = tmp_path_factory.mktemp("own-files") / "pipeline"
    sla_nlp(tiny_bert).to_disk(path)
    return path


def linked_copy(saved, destination, name, target):
    """A copy of the saved pipeline whose sla_transformer/`name` is a
    symbolic link to `target`."""
    spacy.load(saved).to_disk(destination)
    own = destination / "sla_transformer" / name
    own.unlink()
    own.symlink_to(target)
    return destination


@pytest.mark.parametrize("name", ["cfg", "model"])
def test_a_component_file_linked_outside_its_directory_is_refused_unread(saved_sla_pipeline, tmp_path, name):
    outside = tmp_path / "outside.json"
    outside.write_bytes((saved_sla_pipeline / "sla_transformer" / name).read_bytes())
    pipeline = linked_copy(saved_sla_pipeline, tmp_path / "linked", name, outside)
    with opened_files() as opened:
        with pytest.raises(ValueError, match=rf"\[SLA-E127\] The SLA transformer's saved {name} at .*linked/"
                                             rf"sla_transformer/{name} is a link to {re.escape(str(outside))}, "
                                             r"outside the directory"):
            spacy.load(pipeline)
    assert str(outside) not in opened and opened


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("name", ["cfg", "model"])
def test_a_component_file_that_is_a_device_or_a_fifo_is_refused_unread(saved_sla_pipeline, tmp_path, name):
    pipeline = linked_copy(saved_sla_pipeline, tmp_path / "device", name, "/dev/zero")
    with pytest.raises(ValueError, match=r"\[SLA-E127\].* is a link to /dev/zero, outside the directory"):
        spacy.load(pipeline)
    fifo = tmp_path / "device" / "sla_transformer" / name
    fifo.unlink()
    os.mkfifo(fifo)  # opening it would block until a writer comes
    with pytest.raises(ValueError, match=r"\[SLA-E127\].* is not a regular file \(a device, a fifo"):
        spacy.load(pipeline)


def test_a_link_inside_the_component_directory_loads(saved_sla_pipeline, tmp_path):
    pipeline = tmp_path / "inside"
    spacy.load(saved_sla_pipeline).to_disk(pipeline)
    own = pipeline / "sla_transformer"
    (own / "cfg").rename(own / "cfg.json")
    (own / "cfg").symlink_to("cfg.json")
    nlp = spacy.load(pipeline)
    assert len(trf_output(nlp(the_cat_sat(nlp.vocab)))) > 0
