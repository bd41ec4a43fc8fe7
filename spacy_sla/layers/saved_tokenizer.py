"""What the tokenizer of a saved SLA transformer may read and run when a
pipeline directory loads.

A saved SLA transformer carries its tokenizer's files (name -> bytes); the
shim writes them into a temporary folder and lets transformers load the
tokenizer from there. Everything the tokenizer reads must be one of those
files, and nothing shipped with them may run unless the loading user says so:

- file names are plain names a file system takes (no folder part, at most
  255 bytes): [SLA-E046], [SLA-E090];
- the settings files that transformers turns into the tokenizer's arguments
  (tokenizer_config.json, special_tokens_map.json) name files only among
  the saved ones: transformers opens a path from them in preference to the
  file it found itself, so `"vocab_file": "/proc/self/environ"` would make
  the environment the vocabulary ([SLA-E089]). A plain name of a saved file
  is pointed at that file in the temporary folder (and given back to the
  loaded tokenizer, so that saving the pipeline again writes it as it was);
- code named by the saved files (`auto_map`) or by the pipeline's config
  (`trust_remote_code`) runs only with SPACY_SLA_TRUST_REMOTE_CODE=1 in the
  loading process's environment ([SLA-E047], [SLA-W005]): a directory can
  write its own config.cfg, but not the environment it is loaded in.
"""
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Dict, List, Mapping, Optional

from ..errors import Errors

TRUST_REMOTE_CODE = "trust_remote_code"
TRUST_REMOTE_CODE_VARIABLE = "SPACY_SLA_TRUST_REMOTE_CODE"
CONSENTING_VALUES = ("1", "true", "yes")
# The saved files whose entries transformers passes to the tokenizer class
# as keyword arguments (tokenizer_config.json's also positionally, as
# "init_inputs").
SETTINGS_FILES = ("tokenizer_config.json", "special_tokens_map.json")
# Where a tokenizer was once loaded from, which older transformers versions
# saved: transformers sets name_or_path anew and never opens the others, so
# they are dropped rather than refused.
PROVENANCE_SETTINGS = ("name_or_path", "special_tokens_map_file", "tokenizer_config_file")
# A setting whose name has one of these words (split at "_") holds a path:
# vocab_file, merges_file, tokenizer_file, fast_tokenizer_files, spm_file,
# source_spm, sentencepiece_model_ckpt, sp_model_kwargs' model_file, the
# "vocab" of Pop2Piano, ... (every key of a VOCAB_FILES_NAMES in transformers).
PATH_WORDS = frozenset({"file", "files", "path", "paths", "dir", "directory", "folder", "ckpt", "spm", "vocab"})
POSITIONAL_SETTINGS = "init_inputs"
MAX_NAME_BYTES = 255  # NAME_MAX of ext4, APFS and NTFS (in UTF-16 units there)


def check_tokenizer_file_name(name: str) -> str:
    """A name of a saved tokenizer file, refused unless it is a plain file
    name ([SLA-E046]): the files are written under their names into a
    temporary folder when a pipeline loads, so a name with a folder part (an
    absolute path, `../`, a drive) would write outside it; and unless a file
    system takes it ([SLA-E090])."""
    plain = (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "\x00" not in name
        and PurePosixPath(name).name == name
        and PureWindowsPath(name).name == name
    )
    if not plain:
        raise ValueError(Errors.E046.format(name=repr(name)))
    n_bytes = len(name.encode("utf8", errors="surrogatepass"))
    if n_bytes > MAX_NAME_BYTES:
        shown = repr(name[:40] + "...")
        raise ValueError(Errors.E090.format(name=shown, n_bytes=n_bytes, limit=MAX_NAME_BYTES))
    return name


def is_path_setting(key: Any) -> bool:
    return isinstance(key, str) and bool(PATH_WORDS & set(key.lower().split("_")))


def names_a_file(key: Any) -> bool:
    """Whether a setting's value is a file (its name ends in a path word:
    vocab_file, source_spm, vocab; not vocab_size): a number there is a file
    descriptor to open(), anything but a name or null is refused."""
    return isinstance(key, str) and key.lower().split("_")[-1] in PATH_WORDS


def remote_code_consented() -> bool:
    """Whether the loading user allows code shipped with a pipeline to run:
    SPACY_SLA_TRUST_REMOTE_CODE=1 (or true, yes) in this process's
    environment, read at each load."""
    return os.environ.get(TRUST_REMOTE_CODE_VARIABLE, "").strip().lower() in CONSENTING_VALUES


@dataclass
class LoadableTokenizerFiles:
    """The saved tokenizer files as they are written for transformers, and
    what loading them asks for."""

    files: Dict[str, bytes]
    # top-level settings pointed at the temporary folder -> their saved values
    saved_values: Dict[str, Any] = field(default_factory=dict)
    # why the files ask to run shipped code, if they do
    code_requests: List[str] = field(default_factory=list)

    def restore_saved_values(self, tokenizer: Any) -> None:
        """Give the loaded tokenizer the saved values of the settings that
        were pointed at the temporary folder, so that saving it writes them
        as they were (and not a folder that is gone)."""
        init_kwargs = getattr(tokenizer, "init_kwargs", None)
        if isinstance(init_kwargs, dict):
            for key, value in self.saved_values.items():
                if key in init_kwargs:
                    init_kwargs[key] = value


def loadable_tokenizer_files(files: Mapping[str, bytes], folder: Path) -> LoadableTokenizerFiles:
    """The saved tokenizer files, checked, with the settings files' path
    values pointed at `folder`, where the files are written; [SLA-E046],
    [SLA-E090] for a file name, [SLA-E089] for a setting that names a file
    outside them. Nothing is written here."""
    for name in files:
        check_tokenizer_file_name(name)
    result = LoadableTokenizerFiles(dict(files))
    for name in SETTINGS_FILES:
        if name not in files:
            continue
        settings = _json_object(name, files[name])
        for key in PROVENANCE_SETTINGS:
            settings.pop(key, None)
        for key, value in list(settings.items()):
            if key == POSITIONAL_SETTINGS:
                _check_nested(name, key, value, under_path=True, names_file=True)
            elif is_path_setting(key) and isinstance(value, (str, list)):
                settings[key] = _in_folder(name, key, value, files, folder)
                result.saved_values[key] = value
            else:
                _check_nested(name, key, value, under_path=False, names_file=names_a_file(key))
        if "auto_map" in settings:
            result.code_requests.append(f"{name} names code in auto_map")
        result.files[name] = json.dumps(settings, ensure_ascii=False).encode("utf8")
    return result


def _json_object(name: str, data: bytes) -> Dict[str, Any]:
    try:
        settings = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(Errors.E089.format(file=name, problem=f"is not JSON ({error})")) from None
    if not isinstance(settings, dict):
        raise ValueError(Errors.E089.format(file=name, problem=f"is a JSON {type(settings).__name__}, not an object"))
    return settings


def _outside(name: str, key: str, value: Any, files: Mapping[str, bytes]) -> ValueError:
    saved = ", ".join(sorted(files)) or "none"
    problem = (f"sets `{key}` to {value!r}, which is not one of the tokenizer files saved with the pipeline "
               f"({saved}); transformers would open it as a file")
    return ValueError(Errors.E089.format(file=name, problem=problem))


def _in_folder(name: str, key: str, value: Any, files: Mapping[str, bytes], folder: Path) -> Any:
    """A top-level path setting (a name, or a list of names) pointed at the
    saved files in `folder`."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_nested(name, f"{key}[{index}]", item, under_path=False, names_file=names_a_file(key))
        return [_in_folder(name, key, item, files, folder) if isinstance(item, str) else item for item in value]
    if value not in files:
        raise _outside(name, key, value, files)
    return str(folder / value)


def _check_nested(name: str, dotted: str, value: Any, under_path: bool, names_file: bool = False) -> None:
    """Refuse a string under a path setting inside another setting (e.g.
    sp_model_kwargs' model_file, which sentencepiece opens), and in
    init_inputs, which go to the tokenizer class positionally (the first
    is its vocabulary file): transformers saves neither. Where a file
    belongs (`names_file`), anything but a name or null is refused:
    open(3) reads this process's file descriptor 3, open(True) its stdout."""
    if isinstance(value, dict) and not names_file:
        for key, item in value.items():
            _check_nested(name, f"{dotted}.{key}", item, is_path_setting(key), names_a_file(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_nested(name, f"{dotted}[{index}]", item, under_path, names_file)
    elif under_path and isinstance(value, str):
        problem = (f"sets `{dotted}` to {value!r}, a path where transformers saves none; the tokenizer would "
                   "open it as a file")
        raise ValueError(Errors.E089.format(file=name, problem=problem))
    elif names_file and value is not None and not isinstance(value, (str, list)):
        opened = (f"open it as file descriptor {int(value)} of the loading process" if isinstance(value, int)
                  else "pass it to open()")
        problem = f"sets `{dotted}` to {value!r} (of type {type(value).__name__}), where a saved file's name belongs; " \
                  f"the tokenizer would {opened}"
        raise ValueError(Errors.E089.format(file=name, problem=problem))


def configured_code_requests(where: str, **settings: Any) -> List[str]:
    """Why settings (tokenizer_config=..., transformer_config=...) ask to
    run shipped code: any true value of trust_remote_code, which
    transformers takes as consent ("yes" too)."""
    return [f"the transformer's {name} in {where} sets trust_remote_code" for name, values in settings.items()
            if isinstance(values, Mapping) and values.get(TRUST_REMOTE_CODE)]


def code_requests(tokenizer_config: Mapping[str, Any], transformer_config: Mapping[str, Any],
                  model_config: Mapping[str, Any], tokenizer_files: LoadableTokenizerFiles) -> List[str]:
    """Why loading would run code shipped with the pipeline: the pipeline's
    config asks for trust_remote_code, or its saved files name code."""
    requests = configured_code_requests("its config.cfg", tokenizer_config=tokenizer_config,
                                        transformer_config=transformer_config)
    if "auto_map" in model_config:
        requests.append("its model config names code in auto_map")
    return requests + tokenizer_files.code_requests


def trusting_remote_code(requests: List[str]) -> bool:
    """Whether to load with trust_remote_code: only where the pipeline asks
    for it and the loading user consents; [SLA-E047] where it asks without
    consent."""
    if not requests:
        return False
    if not remote_code_consented():
        raise ValueError(Errors.E047.format(reason="; ".join(requests)))
    return True


def vocab_file_contents(tokenizer: Any, folder: Path) -> Optional[bytes]:
    """The bytes of the tokenizer's vocabulary file, which spacy-transformers
    keeps beside the tokenizer, read from `folder`."""
    if not hasattr(tokenizer, "vocab_file"):
        return None
    file_name: str = tokenizer.vocab_files_names["vocab_file"]
    return (folder / file_name).read_bytes()
