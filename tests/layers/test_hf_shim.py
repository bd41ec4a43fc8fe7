"""Loading a pipeline directory that someone else wrote: the SLA
transformer's saved model may be tampered with, and loading must neither
write outside its temporary folder nor run code shipped with it."""
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
import spacy
import srsly
import torch

from spacy_sla.layers.hf_shim import check_tokenizer_file_name, loading_tokenizer_settings

from .file_reads import opened_files
from util import sla_nlp, the_cat_sat, trf_output

MODEL_FILE = Path("sla_transformer") / "model"


@pytest.fixture(scope="module")
def saved_pipeline(tiny_bert, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "pipeline"
    sla_nlp(tiny_bert).to_disk(path)
    return path


def tampered_copy(saved: Path, destination: Path, change: Callable[[Dict[str, Any]], None]) -> Path:
    """A copy of the saved pipeline whose SLA shim message went through
    `change` (the message HFShim.to_bytes writes: config, state, tokenizer)."""
    nlp = spacy.load(saved)
    nlp.to_disk(destination)
    model = srsly.msgpack_loads((destination / MODEL_FILE).read_bytes())
    (node_shims,) = [shims for shims in model["shims"] if shims]
    shim = srsly.msgpack_loads(node_shims[0])
    change(shim)
    node_shims[0] = srsly.msgpack_dumps(shim)
    (destination / MODEL_FILE).write_bytes(srsly.msgpack_dumps(model))
    return destination


@pytest.mark.parametrize("name", ["../escaped.txt", "sub/escaped.txt", "..\\escaped.txt", "", ".."])
def test_a_tokenizer_file_name_with_a_folder_part_is_refused(name):
    with pytest.raises(ValueError, match=r"\[SLA-E046\]"):
        check_tokenizer_file_name(name)


def test_plain_tokenizer_file_names_are_kept():
    assert check_tokenizer_file_name("vocab.txt") == "vocab.txt"
    assert check_tokenizer_file_name(".hidden.json") == ".hidden.json"


def test_an_escaping_tokenizer_file_refuses_to_load_and_writes_nothing(saved_pipeline, tmp_path):
    outside = tmp_path / "outside.txt"

    def add_files(shim):
        shim["tokenizer"][str(outside)] = b"absolute"
        shim["tokenizer"]["../../../../../../../../" + str(outside)[1:]] = b"relative"

    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", add_files)
    with pytest.raises(ValueError, match=r"\[SLA-E046\]"):
        spacy.load(tampered)
    assert not outside.exists()


def shipped_code(marker: Path) -> Dict[str, bytes]:
    """Tokenizer files that ask for a tokenizer class defined in a Python file
    among them; importing that file creates `marker`."""
    module = f"from pathlib import Path\nPath({str(marker)!r}).touch()\n" \
             "from transformers import BertTokenizerFast\n\n\n" \
             "class ShippedTokenizer(BertTokenizerFast):\n    pass\n"
    return {"shipped_tokenizer.py": module.encode("utf8")}


def ask_for_shipped_tokenizer(shim: Dict[str, Any], marker: Path, saved_trust: bool = True) -> None:
    tokenizer = shim["tokenizer"]
    settings = json.loads(tokenizer["tokenizer_config.json"])
    settings["auto_map"] = {"AutoTokenizer": [None, "shipped_tokenizer.ShippedTokenizer"]}
    settings["tokenizer_class"] = "ShippedTokenizer"
    tokenizer["tokenizer_config.json"] = json.dumps(settings).encode("utf8")
    tokenizer.update(shipped_code(marker))
    if saved_trust:
        tokenizer["kwargs"] = {**tokenizer.get("kwargs", {}), "trust_remote_code": True}


def test_saved_trust_remote_code_never_runs_shipped_code(saved_pipeline, tmp_path, monkeypatch):
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    marker = tmp_path / "code-ran"
    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", lambda shim: ask_for_shipped_tokenizer(shim, marker))
    with pytest.raises(ValueError, match=r"\[SLA-E047\].*auto_map.*SPACY_SLA_TRUST_REMOTE_CODE=1"):
        spacy.load(tampered)
    assert not marker.exists()


def trusting_config(pipeline: Path) -> Path:
    """The pipeline's config.cfg with `trust_remote_code = true` in the
    transformer's tokenizer_config, as a directory that asks for it has."""
    config = spacy.util.load_config(pipeline / "config.cfg", interpolate=False)
    config["components"]["sla_transformer"]["model"]["tokenizer_config"]["trust_remote_code"] = True
    config.to_disk(pipeline / "config.cfg", interpolate=False)
    return pipeline


@pytest.mark.parametrize("override", [
    None,
    # the recipe that older docs gave for refusing code: spaCy merges it into the saved setting
    {"components.sla_transformer.model.tokenizer_config": {"use_fast": True}},
    # a load-time setting is no consent either: the saved config could hold the same
    {"components.sla_transformer.model.tokenizer_config": {"use_fast": True, "trust_remote_code": True}},
])
def test_a_config_that_asks_for_shipped_code_does_not_run_it_without_consent(saved_pipeline, tmp_path, override,
                                                                             monkeypatch):
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    marker = tmp_path / "code-ran"
    tampered = trusting_config(tampered_copy(saved_pipeline, tmp_path / "tampered",
                                             lambda shim: ask_for_shipped_tokenizer(shim, marker, saved_trust=False)))
    with pytest.raises(ValueError, match=r"\[SLA-E047\].*config\.cfg sets trust_remote_code.*"
                                         r"SPACY_SLA_TRUST_REMOTE_CODE=1"):
        spacy.load(tampered, config=override or {})
    assert not marker.exists()


def test_a_config_that_asks_for_code_is_refused_even_where_the_files_ship_none(saved_pipeline, tmp_path, monkeypatch):
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    tampered = trusting_config(tampered_copy(saved_pipeline, tmp_path / "tampered", lambda shim: None))
    with pytest.raises(ValueError, match=r"\[SLA-E047\]"):
        spacy.load(tampered)


@pytest.mark.parametrize("consent", ["0", "", "no"])
def test_only_a_consenting_value_of_the_variable_runs_shipped_code(saved_pipeline, tmp_path, consent, monkeypatch):
    monkeypatch.setenv("SPACY_SLA_TRUST_REMOTE_CODE", consent)
    marker = tmp_path / "code-ran"
    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", lambda shim: ask_for_shipped_tokenizer(shim, marker))
    with pytest.raises(ValueError, match=r"\[SLA-E047\]"):
        spacy.load(tampered)
    assert not marker.exists()


def test_the_loading_users_consent_runs_shipped_code_with_a_warning(saved_pipeline, tmp_path, monkeypatch):
    """The same directory runs the shipped code when the loading process's
    environment consents: the refusals above are the loader's doing, not a
    broken tokenizer."""
    marker = tmp_path / "code-ran"
    tampered = trusting_config(tampered_copy(saved_pipeline, tmp_path / "tampered",
                                             lambda shim: ask_for_shipped_tokenizer(shim, marker, saved_trust=False)))
    monkeypatch.setenv("SPACY_SLA_TRUST_REMOTE_CODE", "1")
    with pytest.warns(UserWarning, match=r"\[SLA-W005\]"):
        nlp = spacy.load(tampered)
    assert marker.exists()
    assert type(nlp.get_pipe("sla_transformer").model.tokenizer).__name__ == "ShippedTokenizer"
    assert len(trf_output(nlp(the_cat_sat(nlp.vocab)))) > 0


# --- what a saved tokenizer may read ---------------------------------------------

SECRET = "HF_TOKEN=hf_not_for_the_vocabulary"


def without_tokenizer_json(shim: Dict[str, Any]) -> Dict[str, Any]:
    """The shim's tokenizer files without tokenizer.json, so that the fast
    tokenizer is made from the slow one's vocabulary file."""
    shim["tokenizer"].pop("tokenizer.json", None)
    return shim["tokenizer"]


def set_setting(tokenizer: Dict[str, Any], file_name: str, key: str, value: Any) -> None:
    settings = json.loads(tokenizer.get(file_name, b"{}"))
    settings[key] = value
    tokenizer[file_name] = json.dumps(settings).encode("utf8")


def test_transformers_itself_would_read_a_vocabulary_path_from_the_tokenizer_settings(saved_pipeline, tmp_path):
    """What the loader guards against: the tampered files below, loaded by
    transformers as they are, make any readable file the vocabulary."""
    from transformers import AutoTokenizer

    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n", encoding="utf8")
    shim = {"tokenizer": dict(_saved_shim(saved_pipeline)["tokenizer"])}
    tokenizer_files = without_tokenizer_json(shim)
    set_setting(tokenizer_files, "tokenizer_config.json", "vocab_file", str(secret))
    folder = tmp_path / "as-saved"
    folder.mkdir()
    for name, contents in tokenizer_files.items():
        if name != "kwargs":
            (folder / name).write_bytes(contents)
    (folder / "config.json").write_text(json.dumps(_saved_shim(saved_pipeline)["config"]), encoding="utf8")
    assert SECRET in AutoTokenizer.from_pretrained(str(folder)).get_vocab()


def _saved_shim(saved: Path) -> Dict[str, Any]:
    model = srsly.msgpack_loads((saved / MODEL_FILE).read_bytes())
    (node_shims,) = [shims for shims in model["shims"] if shims]
    return srsly.msgpack_loads(node_shims[0])


@pytest.mark.parametrize("file_name,key,value", [
    ("tokenizer_config.json", "vocab_file", "SECRET"),
    ("special_tokens_map.json", "vocab_file", "SECRET"),
    ("tokenizer_config.json", "init_inputs", ["SECRET"]),
    ("tokenizer_config.json", "vocab_file", "secret.txt"),  # a bare name: opened in the working directory
    ("tokenizer_config.json", "sp_model_kwargs", {"model_file": "SECRET"}),
    ("tokenizer_config.json", "tokenizer_file", "SECRET"),
])
def test_a_path_setting_outside_the_saved_files_is_refused_unread(saved_pipeline, tmp_path, monkeypatch,
                                                                  file_name, key, value):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n", encoding="utf8")
    monkeypatch.chdir(tmp_path)
    value = json.loads(json.dumps(value).replace("SECRET", str(secret)))

    def point_at_secret(shim):
        set_setting(without_tokenizer_json(shim), file_name, key, value)

    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", point_at_secret)
    with opened_files() as opened:
        with pytest.raises(ValueError, match=rf"\[SLA-E089\] The saved tokenizer file {file_name} .*sets `{key}"):
            spacy.load(tampered)
    assert str(secret) not in opened
    assert opened  # the recording works: the pipeline's own files were opened


def test_a_path_setting_naming_a_saved_file_reads_that_file(saved_pipeline, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vocab.txt").write_text(SECRET + "\n", encoding="utf8")  # a namesake in the working directory

    def name_the_saved_vocabulary(shim):
        set_setting(without_tokenizer_json(shim), "tokenizer_config.json", "vocab_file", "vocab.txt")

    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", name_the_saved_vocabulary)
    with opened_files() as opened:
        nlp = spacy.load(tampered)
    assert str(tmp_path / "vocab.txt") not in opened
    vocabulary = nlp.get_pipe("sla_transformer").model.tokenizer.get_vocab()
    assert SECRET not in vocabulary and "cat" in vocabulary


def test_a_path_setting_is_saved_again_as_it_was_loaded(saved_pipeline, tmp_path):
    def name_the_fast_tokenizer_file(shim):
        set_setting(shim["tokenizer"], "tokenizer_config.json", "fast_tokenizer_files", ["tokenizer.json"])

    nlp = spacy.load(tampered_copy(saved_pipeline, tmp_path / "tampered", name_the_fast_tokenizer_file))
    assert nlp.get_pipe("sla_transformer").model.tokenizer.init_kwargs["fast_tokenizer_files"] == ["tokenizer.json"]
    nlp.to_disk(tmp_path / "again")
    again = spacy.load(tmp_path / "again")
    assert len(trf_output(again(the_cat_sat(again.vocab)))) > 0


def test_a_tokenizer_file_name_longer_than_a_file_system_takes_is_refused(saved_pipeline, tmp_path):
    def add_long_name(shim):
        shim["tokenizer"]["v" * 300 + ".txt"] = b"x"

    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", add_long_name)
    with pytest.raises(ValueError, match=r"\[SLA-E090\].*\(304 bytes\)"):
        spacy.load(tampered)


# --- saved weights that do not fit the saved config ------------------------------

def change_state(change: Callable[[Dict[str, torch.Tensor]], Any]) -> Callable[[Dict[str, Any]], None]:
    """A tampering of the shim's saved weights: `change` edits the state
    dict in place, or returns what is saved instead."""

    def tamper(shim):
        state = torch.load(io.BytesIO(shim["state"]), weights_only=True)
        replaced = change(state)
        buffer = io.BytesIO()
        torch.save(state if replaced is None else replaced, buffer)
        shim["state"] = buffer.getvalue()

    return tamper


WORD_EMBEDDINGS = "transformer.embeddings.word_embeddings.weight"


def gates_only(state):
    return {key: value for key, value in state.items() if ".gate." in key}


QUERY = "transformer.encoder.layer.0.attention.self.query.weight"


def wrong_shape(state):
    state[QUERY] = state[QUERY][:, :8]


def narrow_embeddings(state):
    state[WORD_EMBEDDINGS] = state[WORD_EMBEDDINGS][:, :8]


def integers(state):
    state[WORD_EMBEDDINGS] = state[WORD_EMBEDDINGS].long()


def not_a_number(state):
    state[WORD_EMBEDDINGS][3, 5] = float("nan")


def foreign_weight(state):
    state["transformer.pooler.extra.weight"] = torch.zeros(2, 2)


@pytest.mark.parametrize("change,message", [
    (gates_only, r"\[SLA-E092\].*\(bert\): [1-9][0-9]* weight\(s\) of the encoder are missing .*"
                 r"transformer\.embeddings\.word_embeddings\.weight"),
    (foreign_weight, r"\[SLA-E092\].*0 weight\(s\) of the encoder are missing.*1 weight\(s\) in them are not "
                     r"the encoder's \(transformer\.pooler\.extra\.weight\)"),
    (wrong_shape, r"\[SLA-E093\].*layer\.0\.attention\.self\.query\.weight is float32 of shape \(32, 8\), where the "
                  r"encoder its config builds has float32 of shape \(32, 32\)"),
    (narrow_embeddings, r"\[SLA-E122\].*config sets hidden_size = 32, where its saved weights hold 8 in the shape of "
                        r"its word embeddings"),
    (integers, r"\[SLA-E093\].*word_embeddings\.weight is int64 of shape"),
    (not_a_number, r"\[SLA-E094\].*word_embeddings\.weight holds 1 value"),
    (lambda state: list(state.values()), r"\[SLA-E091\].*weights are a list"),
    (lambda state: {**state, "step": 3}, r"\[SLA-E091\].*1 entr\(y/ies\) that are not named tensors \('step'\)"),
])
def test_saved_weights_that_do_not_fit_the_config_are_refused(saved_pipeline, tmp_path, change, message):
    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", change_state(change))
    with pytest.raises(ValueError, match=message):
        spacy.load(tampered)


def test_saved_weights_in_another_float_type_still_load(saved_pipeline, tmp_path):
    def half(state):
        return {key: value.half() for key, value in state.items()}

    nlp = spacy.load(tampered_copy(saved_pipeline, tmp_path / "tampered", change_state(half)))
    weight = nlp.get_pipe("sla_transformer").model.transformer.transformer.embeddings.word_embeddings.weight
    assert weight.dtype == torch.float32
    assert len(trf_output(nlp(the_cat_sat(nlp.vocab)))) > 0


LOAD_MEASURING_MEMORY = """
import resource, sys
import spacy, spacy_sla, torch
built = []
module_init = torch.nn.Module.__init__


def counting_init(self, *args, **kwargs):
    built.append(type(self).__name__)
    module_init(self, *args, **kwargs)


torch.nn.Module.__init__ = counting_init
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    spacy.load(sys.argv[1])
except ValueError as error:
    print(str(error).splitlines()[0])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) // 1024)  # ru_maxrss is in KiB on Linux
print(len(built))
"""


def without_word_embeddings(shim):
    """intermediate_size = 2,000,000 makes this tiny BERT's feed-forward
    layers 1 GB (a MiniLM's, 37 GB): left to the meta-device model."""
    shim["config"]["intermediate_size"] = 2_000_000
    def drop(state):
        del state[WORD_EMBEDDINGS]

    change_state(drop)(shim)


def four_thousand_layers(shim):
    shim["config"]["num_hidden_layers"] = 4000


def forty_thousand_sinusoidal_positions(shim):
    shim["config"].update(max_position_embeddings=40_000, sinusoidal_pos_embds=True)


def expanded_embeddings(shim):
    shim["config"]["vocab_size"] = 4_000_000

    def expand(state):
        state[WORD_EMBEDDINGS] = torch.zeros(1).expand(4_000_000, state[WORD_EMBEDDINGS].shape[1])

    change_state(expand)(shim)


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss counts KiB on Linux")
@pytest.mark.parametrize("model,change,code,builds", [
    ("tiny_bert", without_word_embeddings, "[SLA-E092]", True),
    ("tiny_bert", four_thousand_layers, "[SLA-E122]", False),
    ("tiny_distilbert", forty_thousand_sinusoidal_positions, "[SLA-E122]", False),
    ("tiny_bert", expanded_embeddings, "[SLA-E123]", False),
])
def test_a_huge_config_is_refused_before_allocating(model, change, code, builds, tmp_path, request):
    """Refused from the names and shapes of the saved weights (or, for sizes
    that cost nothing there, from the meta-device model): the loading
    process's peak memory grows by less than 100 MiB, where building 4,000
    layers takes 200 MB and checking the values of 4,000,000 x 32 expanded
    weights 512 MB; and unless the sizes are the meta device's to bound, no
    torch module is built (DistilBERT computes its table of positions with
    numpy while it builds: 1.4 GB for 40,000 positions of a MiniLM's width)."""
    saved = tmp_path / "saved"
    sla_nlp(request.getfixturevalue(model)).to_disk(saved)
    tampered = tampered_copy(saved, tmp_path / "tampered", change)
    result = subprocess.run([sys.executable, "-c", LOAD_MEASURING_MEMORY, str(tampered)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    message, grown_mib, n_modules = result.stdout.strip().splitlines()
    assert message.startswith(code), message
    assert int(grown_mib) < 100
    assert (int(n_modules) > 0) is builds


def test_a_torch_dtype_other_than_the_weights_is_ignored_with_a_warning(saved_pipeline, tmp_path):
    def half_precision_config(shim):
        shim["config"]["torch_dtype"] = "float16"

    with pytest.warns(UserWarning, match=r"\[SLA-W014\].*torch_dtype = \"float16\""):
        nlp = spacy.load(tampered_copy(saved_pipeline, tmp_path / "tampered", half_precision_config))
    weight = nlp.get_pipe("sla_transformer").model.transformer.transformer.embeddings.word_embeddings.weight
    assert weight.dtype == torch.float32
    assert trf_output(nlp(the_cat_sat(nlp.vocab))).dtype == "float32"


@pytest.mark.parametrize("value", ["int8", "load", "no-such-type"])
def test_a_torch_dtype_that_is_no_float_type_is_a_coded_error(saved_pipeline, tmp_path, value):
    def set_dtype(shim):
        shim["config"]["torch_dtype"] = value

    with pytest.raises(ValueError, match=rf"\[SLA-E125\].*torch_dtype = '{value}'"):
        spacy.load(tampered_copy(saved_pipeline, tmp_path / "tampered", set_dtype))


def test_token_ids_beyond_the_embedding_table_are_refused_at_load(saved_pipeline, tmp_path):
    """The config and the weights agree on 40 rows; the saved tokenizer
    still gives the ids of its 50 pieces."""
    def fewer_rows(shim):
        shim["config"]["vocab_size"] = 40
        change_state(lambda state: state.update({WORD_EMBEDDINGS: state[WORD_EMBEDDINGS][:40].clone()}))(shim)

    with pytest.raises(ValueError, match=r"\[SLA-E126\].*token ids up to [0-9]+, and its embedding table has 40 rows"):
        spacy.load(tampered_copy(saved_pipeline, tmp_path / "tampered", fewer_rows))


def truncated_storage(shim):
    """A weight's storage record shorter than its shape: torch.load's RuntimeError."""
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(shim["state"]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as destination:
        for info in source.infolist():
            data = source.read(info.filename)
            destination.writestr(info, data[:8] if info.filename.endswith("data/0") else data)
    shim["state"] = out.getvalue()


@pytest.mark.parametrize("change,message", [
    (lambda shim: shim.update(state=shim["state"][:100]), r"\[SLA-E091\].*weights are unreadable \(RuntimeError: "),
    (truncated_storage, r"\[SLA-E091\].*weights are unreadable \(RuntimeError: record size"),
    (lambda shim: shim.update(state=3), r"\[SLA-E124\].*damaged: its weights are not bytes"),
    (lambda shim: shim.update(tokenizer=["vocab.txt"]), r"\[SLA-E124\].*its tokenizer files are not a mapping"),
    (lambda shim: shim["tokenizer"].update({"vocab.txt": 3}), r"\[SLA-E124\].*tokenizer files are not a mapping"),
    (lambda shim: shim.update(config=[1]), r"\[SLA-E124\].*no message with a config mapping"),
    (lambda shim: shim.update(_init_tokenizer_config=[]), r"\[SLA-E124\].*its _init_tokenizer_config is no mapping"),
    (lambda shim: shim["config"].update(num_attention_heads=5), r"\[SLA-E124\].*ValueError: The hidden size"),
    (change_state(lambda state: state.update({QUERY: state[QUERY].to_sparse()})), r"\[SLA-E123\].*a sparse tensor"),
    (change_state(lambda state: state.update({QUERY: torch.zeros(32, 32, device="meta")})),
     r"\[SLA-E123\].*on the meta device"),
])
def test_damaged_saved_bytes_are_one_coded_error(saved_pipeline, tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        spacy.load(tampered_copy(saved_pipeline, tmp_path / "tampered", change))


@pytest.mark.parametrize("cut", [10, 1000, -10])
def test_a_truncated_model_file_is_a_coded_error(saved_pipeline, tmp_path, cut):
    nlp = spacy.load(saved_pipeline)
    nlp.to_disk(tmp_path / "tampered")
    data = (tmp_path / "tampered" / MODEL_FILE).read_bytes()
    (tmp_path / "tampered" / MODEL_FILE).write_bytes(data[:cut])
    with pytest.raises(ValueError, match=r"\[SLA-E124\] The SLA transformer's saved model is damaged: \w+"):
        spacy.load(tmp_path / "tampered")


class _RunsOnUnpickling:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickled_object_in_the_weights_is_refused_unrun(saved_pipeline, tmp_path):
    marker = tmp_path / "code-ran"

    def pickle_in_state(shim):
        state = torch.load(io.BytesIO(shim["state"]), weights_only=True)
        state["payload"] = _RunsOnUnpickling(marker)
        buffer = io.BytesIO()
        torch.save(state, buffer)
        shim["state"] = buffer.getvalue()

    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", pickle_in_state)
    with pytest.raises(ValueError, match=r"\[SLA-E048\]"):
        spacy.load(tampered)
    assert not marker.exists()


def test_saved_tokenizer_settings_beyond_use_fast_are_dropped(saved_pipeline, tmp_path):
    cache = tmp_path / "cache"

    def add_settings(shim):
        shim["tokenizer"]["kwargs"] = {"use_fast": True, "cache_dir": str(cache), "trust_remote_code": True}

    nlp = spacy.load(tampered_copy(saved_pipeline, tmp_path / "tampered", add_settings))
    assert len(trf_output(nlp(the_cat_sat(nlp.vocab)))) > 0
    assert not cache.exists()
    assert loading_tokenizer_settings({"use_fast": False, "cache_dir": "x", "trust_remote_code": True}, False) == {
        "use_fast": False,
        "trust_remote_code": False,
    }
    assert loading_tokenizer_settings({}, True) == {"trust_remote_code": True}


def test_a_model_folder_of_the_old_layout_is_refused(saved_pipeline, tmp_path):
    nlp = spacy.load(saved_pipeline)
    nlp.to_disk(tmp_path / "tampered")
    (tmp_path / "tampered" / MODEL_FILE).unlink()
    (tmp_path / "tampered" / MODEL_FILE).mkdir()
    with pytest.raises(ValueError, match=r"\[SLA-E049\]"):
        spacy.load(tmp_path / "tampered")


# --- tokenizer files the model cannot be loaded from: [SLA-E005] with the fix -------

def test_a_fast_tokenizer_without_its_vocabulary_file_gets_a_coded_error(tmp_path):
    from tiny_models import save_tiny_xlmr

    path = save_tiny_xlmr(tmp_path / "xlmr-tokenizer-json", sentencepiece_file=False)
    assert (path / "tokenizer.json").is_file() and not (path / "sentencepiece.bpe.model").exists()
    with pytest.raises(OSError, match=r"\[SLA-E005\] Could not load the transformer .*xlmr-tokenizer-json': its "
                                      r"tokenizer has no vocabulary file .*\(sentencepiece\.bpe\.model\).*beside "
                                      r"tokenizer\.json") as raised:
        sla_nlp(path)
    assert isinstance(raised.value.__cause__, TypeError)


def test_an_xlmr_directory_with_its_sentencepiece_file_loads(tmp_path):
    pytest.importorskip("sentencepiece")
    from tiny_models import save_tiny_xlmr

    nlp = sla_nlp(save_tiny_xlmr(tmp_path / "xlmr"))
    doc = nlp(the_cat_sat(nlp.vocab))
    assert trf_output(doc).shape[-1] == 32


LOAD_WITHOUT_SENTENCEPIECE = """
import sys
sys.modules["sentencepiece"] = None  # as if it were not installed: importlib finds no spec
import spacy, spacy_sla
nlp = spacy.blank("en")
nlp.add_pipe("sla_transformer", config={"model": {"name": sys.argv[1], "tokenizer_config": {"use_fast": sys.argv[2] == "fast"}}})
try:
    nlp.initialize()
except OSError as error:
    print(error)
"""


@pytest.mark.parametrize("use_fast", ["fast", "slow"])
def test_a_sentencepiece_tokenizer_without_the_library_gets_a_coded_error(use_fast, tmp_path):
    import subprocess
    import sys

    pytest.importorskip("sentencepiece")
    from tiny_models import save_tiny_xlmr

    path = save_tiny_xlmr(tmp_path / "xlmr")
    result = subprocess.run([sys.executable, "-c", LOAD_WITHOUT_SENTENCEPIECE, str(path), use_fast],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    message = result.stdout.strip()
    assert message.startswith(f"[SLA-E005] Could not load the transformer '{path}': ")
    assert "`pip install spacy-sla[sentencepiece]`" in message
    reason = "SentencePiece files without the sentencepiece library" if use_fast == "fast" else "requires the SentencePiece library"
    assert reason in message


LOAD_SAVED_WITHOUT_SENTENCEPIECE = """
import sys
sys.modules["sentencepiece"] = None
import spacy, spacy_sla
try:
    spacy.load(sys.argv[1])
except OSError as error:
    print(error)
"""


def test_a_saved_pipeline_whose_tokenizer_needs_sentencepiece_gets_a_coded_error_without_it(tmp_path):
    import subprocess
    import sys

    pytest.importorskip("sentencepiece")
    from tiny_models import save_tiny_xlmr

    model = save_tiny_xlmr(tmp_path / "xlmr")
    nlp = sla_nlp(model, tokenizer_config={"use_fast": False})
    nlp.to_disk(tmp_path / "pipeline")
    result = subprocess.run([sys.executable, "-c", LOAD_SAVED_WITHOUT_SENTENCEPIECE, str(tmp_path / "pipeline")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    message = result.stdout.strip()
    assert message.startswith(f"[SLA-E005] Could not load the transformer '{model}': XLMRobertaTokenizer requires "
                              "the SentencePiece library"), message
    assert "`pip install spacy-sla[sentencepiece]`" in message


# --- consent wherever trust_remote_code comes from, at load and at initialize ------

def model_with_shipped_config(tiny_bert: Path, destination: Path, marker: Path) -> Path:
    """A copy of the tiny model whose config.json names a config class in a
    Python file beside it (auto_map); importing that file creates `marker`."""
    import shutil

    shutil.copytree(tiny_bert, destination)
    config = json.loads((destination / "config.json").read_text(encoding="utf8"))
    config["auto_map"] = {"AutoConfig": "shipped_config.ShippedConfig"}
    (destination / "config.json").write_text(json.dumps(config), encoding="utf8")
    (destination / "shipped_config.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\nfrom transformers import BertConfig\n\n\n"
        "class ShippedConfig(BertConfig):\n    pass\n", encoding="utf8")
    return destination


def uninitialized_pipeline(model: Path, destination: Path, **settings: Any) -> Path:
    """A pipeline saved before its SLA transformer was initialized (its saved
    model has no config and has_transformer = false), whose config.cfg names
    `model` with the settings given."""
    sla_nlp(model, initialize=False, **settings).to_disk(destination)
    return destination


@pytest.mark.parametrize("setting", ["transformer_config", "tokenizer_config"])
def test_an_uninitialized_saved_pipeline_that_asks_for_code_is_refused_at_load(tiny_bert, tmp_path, setting,
                                                                               monkeypatch):
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    marker = tmp_path / "code-ran"
    model = model_with_shipped_config(tiny_bert, tmp_path / "model", marker)
    pipeline = uninitialized_pipeline(model, tmp_path / "pipeline", **{setting: {"trust_remote_code": True}})
    with pytest.raises(ValueError, match=rf"\[SLA-E047\].*\(the transformer's {setting} in its config.cfg sets "
                                         r"trust_remote_code"):
        spacy.load(pipeline)
    assert not marker.exists()


def test_trust_remote_code_in_the_transformer_config_of_a_loaded_pipeline_is_refused(saved_pipeline, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", lambda shim: None)
    config = spacy.util.load_config(tampered / "config.cfg", interpolate=False)
    config["components"]["sla_transformer"]["model"]["transformer_config"]["trust_remote_code"] = True
    config.to_disk(tampered / "config.cfg", interpolate=False)
    with pytest.raises(ValueError, match=r"\[SLA-E047\].*transformer_config in its config.cfg sets trust_remote_code"):
        spacy.load(tampered)


def test_the_saved_model_settings_of_an_uninitialized_pipeline_ask_for_consent(tiny_bert, tmp_path, monkeypatch):
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    pipeline = uninitialized_pipeline(tiny_bert, tmp_path / "pipeline")

    def trust_in_saved_settings(shim):
        shim["_init_tokenizer_config"] = {"trust_remote_code": True}

    tampered = tampered_copy(pipeline, tmp_path / "tampered", trust_in_saved_settings)
    with pytest.raises(ValueError, match=r"\[SLA-E047\].*tokenizer_config in its saved model sets trust_remote_code"):
        spacy.load(tampered)


@pytest.mark.parametrize("how", ["nlp.initialize", "pipe.initialize", "source"])
def test_initializing_a_loaded_component_asks_for_consent_again(tiny_bert, tmp_path, monkeypatch, how):
    """Loaded with consent, initialized without it: the model the loaded
    config names is not imported ([SLA-E047]), whichever way the component
    is initialized, also as a component sourced into another pipeline."""
    marker = tmp_path / "code-ran"
    model = model_with_shipped_config(tiny_bert, tmp_path / "model", marker)
    pipeline = uninitialized_pipeline(model, tmp_path / "pipeline", transformer_config={"trust_remote_code": True})
    monkeypatch.setenv("SPACY_SLA_TRUST_REMOTE_CODE", "1")
    with pytest.warns(UserWarning, match=r"\[SLA-W005\]"):
        nlp = spacy.load(pipeline)
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE")
    with pytest.raises(ValueError, match=r"\[SLA-E047\].*transformer_config in its config.cfg sets trust_remote_code"):
        if how == "nlp.initialize":
            nlp.initialize()
        elif how == "pipe.initialize":
            nlp.get_pipe("sla_transformer").initialize(lambda: [])
        else:
            other = spacy.blank("en")
            other.add_pipe("sla_transformer", source=nlp)
            other.initialize()
    assert not marker.exists()


def test_a_loaded_component_naming_a_model_with_code_never_runs_it_without_consent(tiny_bert, tmp_path,
                                                                                  monkeypatch):
    """No setting asks for code, and the model the loaded config names ships
    some: transformers is told not to trust it (rather than left to ask on
    the terminal), so it builds its own class of the model type."""
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    marker = tmp_path / "code-ran"
    model = model_with_shipped_config(tiny_bert, tmp_path / "model", marker)
    nlp = spacy.load(uninitialized_pipeline(model, tmp_path / "pipeline"))
    nlp.initialize()
    assert not marker.exists()
    assert type(nlp.get_pipe("sla_transformer").model.transformer.config).__name__ == "BertConfig"


def test_a_component_built_from_the_users_own_config_follows_it(tiny_bert, tmp_path, monkeypatch):
    """Training from a model name (a config the user wrote, not a loaded
    directory) needs no variable: its trust_remote_code is the user's."""
    monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    marker = tmp_path / "code-ran"
    model = model_with_shipped_config(tiny_bert, tmp_path / "model", marker)
    with pytest.raises(Exception):  # the shipped config class has no model class: the code ran before that
        sla_nlp(model, transformer_config={"trust_remote_code": True})
    assert marker.exists()
