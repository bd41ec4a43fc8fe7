"""Loading a pipeline directory that someone else wrote: the SLA
transformer's saved model may be tampered with, and loading must neither
write outside its temporary folder nor run code shipped with it."""
import io
import json
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
import spacy
import srsly
import torch

from spacy_sla.layers.hf_shim import check_tokenizer_file_name, loading_tokenizer_settings

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


def test_saved_trust_remote_code_never_runs_shipped_code(saved_pipeline, tmp_path):
    marker = tmp_path / "code-ran"
    tampered = tampered_copy(saved_pipeline, tmp_path / "tampered", lambda shim: ask_for_shipped_tokenizer(shim, marker))
    with pytest.raises(ValueError, match=r"\[SLA-E047\]"):
        spacy.load(tampered)
    assert not marker.exists()


def test_trust_remote_code_in_the_loading_config_runs_it_with_a_warning(saved_pipeline, tmp_path):
    """The same directory runs the shipped code when the user's own config
    asks for it: the refusal above is the loader's doing, not a broken
    tokenizer."""
    marker = tmp_path / "code-ran"
    tampered = tampered_copy(
        saved_pipeline, tmp_path / "tampered", lambda shim: ask_for_shipped_tokenizer(shim, marker, saved_trust=False)
    )
    trusted = {"use_fast": True, "trust_remote_code": True}
    with pytest.warns(UserWarning, match=r"\[SLA-W005\]"):
        nlp = spacy.load(tampered, config={"components.sla_transformer.model.tokenizer_config": trusted})
    assert marker.exists()
    assert len(trf_output(nlp(the_cat_sat(nlp.vocab)))) > 0


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
    assert loading_tokenizer_settings({"use_fast": False, "cache_dir": "x", "trust_remote_code": True}, {}) == {
        "use_fast": False,
        "trust_remote_code": False,
    }
    assert loading_tokenizer_settings({}, {"trust_remote_code": True}) == {"trust_remote_code": True}


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
