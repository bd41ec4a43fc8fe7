"""The checks of a saved tokenizer's files and settings, one by one (the
pipelines that carry them: test_hf_shim.py)."""
import json
import re
from pathlib import Path

import pytest

from spacy_sla.layers.saved_tokenizer import (
    check_tokenizer_file_name,
    code_requests,
    configured_code_requests,
    is_path_setting,
    loadable_tokenizer_files,
    remote_code_consented,
    trusting_remote_code,
)

FOLDER = Path("/loader/temporary")
VOCAB = b"[PAD]\n[UNK]\n"


def loaded(settings: dict, file_name: str = "tokenizer_config.json", **other_files: bytes):
    files = {"vocab.txt": VOCAB, file_name: json.dumps(settings).encode("utf8"), **other_files}
    result = loadable_tokenizer_files(files, FOLDER)
    return result, json.loads(result.files[file_name])


def test_a_name_longer_than_a_file_system_takes_is_refused():
    assert check_tokenizer_file_name("v" * 251 + ".txt") == "v" * 251 + ".txt"
    with pytest.raises(ValueError, match=r"\[SLA-E090\].*\(256 bytes\)"):
        check_tokenizer_file_name("v" * 252 + ".txt")
    with pytest.raises(ValueError, match=r"\[SLA-E090\].*\(258 bytes\)"):
        check_tokenizer_file_name("é" * 129)  # bytes, not characters


@pytest.mark.parametrize("key", ["vocab_file", "merges_file", "tokenizer_file", "fast_tokenizer_files", "spm_file",
                                 "source_spm", "sentencepiece_model_ckpt", "vocab", "entity_vocab_file", "cache_dir"])
def test_settings_named_like_paths_are_paths(key):
    assert is_path_setting(key)


@pytest.mark.parametrize("key", ["do_lower_case", "model_max_length", "unk_token", "tokenizer_class", "padding_side",
                                 "additional_special_tokens", 3])
def test_other_settings_are_not(key):
    assert not is_path_setting(key)


@pytest.mark.parametrize("value", ["/proc/self/environ", "../vocab.txt", "sub/vocab.txt", ".env", "C:\\vocab.txt",
                                   ["vocab.txt", "/etc/passwd"]])
def test_a_path_setting_outside_the_saved_files_is_refused(value):
    with pytest.raises(ValueError, match=r"\[SLA-E089\] The saved tokenizer file tokenizer_config.json of the SLA "
                                         r"transformer sets `vocab_file` to .*not one of the tokenizer files saved "
                                         r"with the pipeline \(tokenizer_config.json, vocab.txt\)"):
        loaded({"vocab_file": value})


def test_special_tokens_map_is_checked_as_the_tokenizer_config_is():
    with pytest.raises(ValueError, match=r"\[SLA-E089\] The saved tokenizer file special_tokens_map.json .*`merges_file`"):
        loaded({"unk_token": "[UNK]", "merges_file": "/etc/passwd"}, "special_tokens_map.json")


@pytest.mark.parametrize("settings,key", [
    ({"init_inputs": ["/etc/passwd"]}, "init_inputs[0]"),
    ({"sp_model_kwargs": {"model_file": "/etc/passwd"}}, "sp_model_kwargs.model_file"),
    ({"sudachi_kwargs": {"sudachi_config_path": "vocab.txt"}}, "sudachi_kwargs.sudachi_config_path"),
    ({"vocab_files": [{"model_file": "/etc/passwd"}]}, "vocab_files[0]"),
    ({"init_inputs": [{"vocab": "vocab.txt"}]}, "init_inputs[0]"),
])
def test_a_path_inside_another_setting_is_refused_even_a_saved_name(settings, key):
    with pytest.raises(ValueError, match=r"\[SLA-E089\].*sets `" + re.escape(key) + "`"):
        loaded(settings)


@pytest.mark.parametrize("settings,key,shown", [
    ({"vocab_file": 3}, "vocab_file", r"3 \(of type int\), where a saved file's name belongs; the tokenizer would "
                                      r"open it as file descriptor 3 of the loading process"),
    ({"vocab_file": 0}, "vocab_file", r"0 \(of type int\)"),
    ({"merges_file": True}, "merges_file", r"True \(of type bool\), .* as file descriptor 1 "),
    ({"vocab_file": 2.5}, "vocab_file", r"2.5 \(of type float\), .*would pass it to open\(\)"),
    ({"vocab_file": {"path": "vocab.txt"}}, "vocab_file", r"\{'path': 'vocab.txt'\} \(of type dict\)"),
    ({"fast_tokenizer_files": ["vocab.txt", 4]}, r"fast_tokenizer_files\[1\]", r"4 \(of type int\)"),
    ({"sp_model_kwargs": {"model_file": 5}}, r"sp_model_kwargs\.model_file", r"5 \(of type int\)"),
    ({"init_inputs": [3]}, r"init_inputs\[0\]", r"3 \(of type int\)"),
    ({"vocab": 7}, "vocab", r"7 \(of type int\)"),
])
def test_a_value_other_than_a_name_where_a_file_belongs_is_refused(settings, key, shown):
    """open(3) would read the loading process's file descriptor 3 (and close
    it under its owner): only a saved file's name, or null, is taken."""
    with pytest.raises(ValueError, match=rf"\[SLA-E089\] The saved tokenizer file tokenizer_config.json of the SLA "
                                         rf"transformer sets `{key}` to {shown}"):
        loaded(settings)


def test_numbers_in_settings_that_hold_no_file_are_kept():
    _, settings = loaded({"vocab_size": 2, "model_max_length": 512, "vocab_file": None,
                          "sp_model_kwargs": {"nbest_size": -1, "model_file": None}})
    assert settings == {"vocab_size": 2, "model_max_length": 512, "vocab_file": None,
                        "sp_model_kwargs": {"nbest_size": -1, "model_file": None}}


def test_a_saved_name_is_pointed_at_the_loaders_folder_and_remembered():
    result, settings = loaded({"vocab_file": "vocab.txt", "fast_tokenizer_files": ["vocab.txt"], "vocab_size": 2,
                               "sp_model_kwargs": {"model_file": None, "alpha": 0.1}, "init_inputs": [],
                               "do_lower_case": True})
    assert settings == {"vocab_file": str(FOLDER / "vocab.txt"), "fast_tokenizer_files": [str(FOLDER / "vocab.txt")],
                        "vocab_size": 2, "sp_model_kwargs": {"model_file": None, "alpha": 0.1}, "init_inputs": [],
                        "do_lower_case": True}
    assert result.saved_values == {"vocab_file": "vocab.txt", "fast_tokenizer_files": ["vocab.txt"]}
    assert result.files["vocab.txt"] == VOCAB

    class Tokenizer:
        init_kwargs = {"vocab_file": str(FOLDER / "vocab.txt"), "do_lower_case": True}

    tokenizer = Tokenizer()
    result.restore_saved_values(tokenizer)
    assert tokenizer.init_kwargs == {"vocab_file": "vocab.txt", "do_lower_case": True}


def test_where_a_tokenizer_was_loaded_from_is_dropped():
    _, settings = loaded({"name_or_path": "/home/someone/model", "special_tokens_map_file": "/home/someone/s.json",
                          "tokenizer_config_file": "/x", "unk_token": "[UNK]"})
    assert settings == {"unk_token": "[UNK]"}


@pytest.mark.parametrize("data,problem", [(b"{not json", "is not JSON"), (b"[1, 2]", "is a JSON list, not an object"),
                                          (b"\xff\xfe", "is not JSON")])
def test_a_settings_file_that_is_no_json_object_is_refused(data, problem):
    with pytest.raises(ValueError, match=rf"\[SLA-E089\] The saved tokenizer file tokenizer_config.json of the SLA "
                                         rf"transformer {problem}"):
        loadable_tokenizer_files({"tokenizer_config.json": data}, FOLDER)


def test_what_asks_for_shipped_code():
    files, _ = loaded({"auto_map": {"AutoTokenizer": ["x.Tokenizer", None]}})
    assert code_requests({"trust_remote_code": True}, {"trust_remote_code": "yes"},
                         {"auto_map": {"AutoModel": "x.Model"}}, files) == [
        "the transformer's tokenizer_config in its config.cfg sets trust_remote_code",
        "the transformer's transformer_config in its config.cfg sets trust_remote_code",
        "its model config names code in auto_map",
        "tokenizer_config.json names code in auto_map",
    ]
    plain, _ = loaded({"unk_token": "[UNK]"})
    assert code_requests({"trust_remote_code": False, "use_fast": True}, {}, {"model_type": "bert"}, plain) == []
    assert configured_code_requests("its saved model", tokenizer_config=[True], transformer_config={
        "trust_remote_code": 1}) == ["the transformer's transformer_config in its saved model sets trust_remote_code"]


@pytest.mark.parametrize("value,consents", [("1", True), ("true", True), (" YES ", True), ("0", False), ("", False),
                                            ("false", False), (None, False)])
def test_only_the_environment_consents_to_shipped_code(monkeypatch, value, consents):
    if value is None:
        monkeypatch.delenv("SPACY_SLA_TRUST_REMOTE_CODE", raising=False)
    else:
        monkeypatch.setenv("SPACY_SLA_TRUST_REMOTE_CODE", value)
    assert remote_code_consented() is consents
    assert trusting_remote_code([]) is False
    if consents:
        assert trusting_remote_code(["its model config names code in auto_map"]) is True
    else:
        with pytest.raises(ValueError, match=r"\[SLA-E047\].*\(its model config names code in auto_map\)"):
            trusting_remote_code(["its model config names code in auto_map"])
