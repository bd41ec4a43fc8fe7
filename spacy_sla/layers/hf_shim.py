import os
import pickle
import re
import traceback
import warnings
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, cast

import srsly
import torch
from huggingface_hub.utils import HFValidationError
from spacy.util import SimpleFrozenDict, make_tempdir
from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.hf_shim import HFShim
from spacy_transformers.layers.transformer_model import huggingface_from_pretrained
from thinc.api import get_torch_default_device
from thinc.types import ArgsKwargs
from torch import nn
from transformers import AutoConfig, AutoTokenizer, PretrainedConfig
from transformers.utils import is_sentencepiece_available

from ..errors import Errors, TransformerLoadFixes, Warnings
from .saved_config import check_config_sizes, check_token_ids, in_saved_dtype
from .saved_state import built_on_meta, check_saved_state, check_state_entries
from .saved_tokenizer import (
    TRUST_REMOTE_CODE,
    check_tokenizer_file_name,
    code_requests,
    configured_code_requests,
    loadable_tokenizer_files,
    trusting_remote_code,
    vocab_file_contents,
)
from .syntax_aware_transformer import SyntaxAwareTransformer, is_added_key

__all__ = [
    "SLAShim", "check_config_and_tokenizer", "check_tokenizer_file_name", "coded_load_errors", "damage_as_coded_error",
    "load_pretrained", "loading_tokenizer_settings",
]

# The only tokenizer setting spacy-transformers saves with a model; a saved
# setting beyond it did not come from saving a pipeline, so it is dropped.
SAVED_TOKENIZER_SETTINGS = ("use_fast",)


class SyntaxAwareTransformerFactory:
    """Stands in for AutoModel where spacy-transformers rebuilds a saved
    model from its config, so that the rebuilt model has the configured
    syntax-aware attention (options of SyntaxAwareTransformer)."""

    def __init__(self, options: Dict[str, Any]):
        self.options = options

    def from_config(self, config: PretrainedConfig) -> SyntaxAwareTransformer:
        return SyntaxAwareTransformer.from_config(config, **self.options)


def loading_tokenizer_settings(saved: Mapping[str, Any], trust_remote_code: bool) -> Dict[str, Any]:
    """The tokenizer settings a saved model is loaded with: of the saved
    ones, only those spacy-transformers saves itself; `trust_remote_code`
    as the loader decided it (saved_tokenizer.trusting_remote_code), never
    from the saved model."""
    settings = {key: saved[key] for key in SAVED_TOKENIZER_SETTINGS if key in saved}
    settings[TRUST_REMOTE_CODE] = trust_remote_code
    return settings


class SLAShim(HFShim):
    """The HFShim of spacy-transformers around a SyntaxAwareTransformer.

    Serialization is HFShim's format: the saved state is the
    SyntaxAwareTransformer's state dict (encoder and gates) with the
    encoder's config and tokenizer files. Loading (from_bytes) is our own,
    because the bytes come from a pipeline directory that may not be the
    user's (docs/trust.md): the tokenizer files are checked and written
    into a temporary folder, and the tokenizer reads only them
    (saved_tokenizer.py); code shipped with the model runs only with the
    loading user's consent (SPACY_SLA_TRUST_REMOTE_CODE=1); the weights are
    read with `weights_only=True` (tensors only, no pickled objects,
    whatever torch's default) and checked against the model the saved
    config builds on the meta device before it is built for real
    (saved_state.py).

    Prediction leaves the module in eval mode (see predict), so that threads
    sharing one pipeline can predict at the same time.
    """

    def __init__(
        self,
        model: HFObjects,
        options: Dict[str, Any],
        mixed_precision: bool = False,
        grad_scaler_config: Optional[Dict[str, Any]] = None,
    ):
        super().__init__(
            model,
            mixed_precision=mixed_precision,
            # HFShim writes into this dict, so never pass a shared default.
            grad_scaler_config=dict(grad_scaler_config or {}),
            model_cls=SyntaxAwareTransformerFactory(options),
        )
        # whether the weights, or the settings to load them, came with a saved pipeline (from_bytes)
        self.from_saved = False

    def predict(self, inputs: ArgsKwargs) -> Any:
        """PyTorchShim.predict without its switch back to training mode at the
        end: with threads predicting at once, one thread's switch would turn
        on dropout in the middle of another's forward pass. begin_update
        switches to training mode itself, so training does not rely on it."""
        self._model.eval()
        with torch.no_grad():
            with torch.autocast(device_type="cuda", enabled=self._mixed_precision):
                return self._model(*inputs.args, **inputs.kwargs)

    def from_bytes(self, bytes_data: bytes) -> "SLAShim":
        msg = saved_message(bytes_data)
        # Whatever the model is later initialized from came with a saved
        # pipeline: SLATransformerModel's init asks for consent too.
        self.from_saved = True
        config_dict = msg["config"]
        configured = self._hfmodel._init_tokenizer_config or {}
        configured_transformer = self._hfmodel._init_transformer_config or {}
        if not config_dict:
            requests = configured_code_requests("its config.cfg", tokenizer_config=configured,
                                                transformer_config=configured_transformer)
            requests += configured_code_requests("its saved model", tokenizer_config=msg["_init_tokenizer_config"],
                                                 transformer_config=msg["_init_transformer_config"])
            if trusting_remote_code(requests):
                warnings.warn(Warnings.W005)
            self._hfmodel = HFObjects(
                None, None, None, msg["_init_tokenizer_config"], msg["_init_transformer_config"]
            )
            return self
        saved_files = dict(msg["tokenizer"])
        saved_settings = saved_files.pop("kwargs", {}) or {}
        with make_tempdir() as temp_dir:
            folder = temp_dir.absolute()
            tokenizer_files = loadable_tokenizer_files(saved_files, folder)
            requests = code_requests(configured, configured_transformer, config_dict, tokenizer_files)
            trust_remote_code = trusting_remote_code(requests)
            if trust_remote_code:
                warnings.warn(Warnings.W005)
            state = check_state_entries(_saved_state(msg["state"]))
            config_file = folder / "config.json"
            srsly.write_json(config_file, in_saved_dtype(config_dict, state))
            try:
                config = self.config_cls.from_pretrained(config_file, trust_remote_code=trust_remote_code)
            except ValueError as error:
                raise _remote_code_error(error, trust_remote_code) from None
            check_config_sizes(config, state)

            def build() -> SyntaxAwareTransformer:
                model: SyntaxAwareTransformer = self.model_cls.from_config(config)
                return model

            on_meta = built_on_meta(build)
            loadable_state = check_saved_state(on_meta, state, is_added_key)
            for name, contents in tokenizer_files.files.items():
                (folder / name).write_bytes(contents)
            settings = loading_tokenizer_settings(saved_settings, trust_remote_code)
            try:
                tokenizer = self.tokenizer_cls.from_pretrained(str(folder), **settings)
            except (ImportError, ValueError) as error:
                if is_missing_library(error):
                    name = config_dict.get("_name_or_path") or "saved with the pipeline"
                    raise OSError(Errors.E005.format(name=name, reason=missing_library_reason(error),
                                                     fix=TransformerLoadFixes.LIBRARY)) from error
                if isinstance(error, ImportError):
                    raise
                raise _remote_code_error(error, trust_remote_code) from None
            embeddings = cast(nn.Embedding, on_meta.transformer.get_input_embeddings())
            check_token_ids(tokenizer, embeddings.num_embeddings)
            tokenizer_files.restore_saved_values(tokenizer)
            vocab_contents = vocab_file_contents(tokenizer, folder)
        transformer = build()
        # The state fits the model (check_saved_state); SLA weights are still
        # checked strictly by SyntaxAwareTransformer.load_state_dict.
        transformer.load_state_dict(loadable_state, strict=False)
        device = get_torch_default_device()
        transformer.to(device)
        self._hfmodel = HFObjects(tokenizer, transformer, vocab_contents, SimpleFrozenDict(), SimpleFrozenDict())
        self._model = transformer
        return self


def saved_message(data: bytes) -> Dict[str, Any]:
    """The shim's saved message (HFShim.to_bytes's), with the fields that
    from_bytes reads of the types it writes; [SLA-E124] for any other."""
    msg = srsly.msgpack_loads(data)
    if not isinstance(msg, dict) or not isinstance(msg.get("config"), dict):
        raise ValueError(Errors.E124.format(reason="its shim holds no message with a config mapping"))
    for field_name in ("_init_tokenizer_config", "_init_transformer_config"):
        if not isinstance(msg.setdefault(field_name, {}), dict):
            raise ValueError(Errors.E124.format(reason=f"its {field_name} is no mapping"))
    if msg["config"]:
        tokenizer = msg.get("tokenizer")
        if not isinstance(tokenizer, dict) or not isinstance(tokenizer.get("kwargs", {}), dict) or not all(
                isinstance(name, str) and isinstance(contents, bytes) for name, contents in tokenizer.items()
                if name != "kwargs"):
            raise ValueError(Errors.E124.format(reason="its tokenizer files are not a mapping of names to bytes"))
        if not isinstance(msg.get("state"), bytes):
            raise ValueError(Errors.E124.format(reason="its weights are not bytes"))
    return msg


def _saved_state(data: bytes) -> Any:
    """The saved weights, read onto the CPU with `weights_only=True`: tensors
    only, whatever torch's default; a pickled object is [SLA-E048]."""
    try:
        return torch.load(BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise ValueError(Errors.E048.format(reason=str(error).splitlines()[0])) from None
    except Exception as error:  # truncated, or a tensor torch cannot rebuild (a shape beyond its storage, ...)
        raise ValueError(Errors.E091.format(reason=f"unreadable ({type(error).__name__}: {first_line(error)})")) \
            from None


def _remote_code_error(error: ValueError, trust_remote_code: bool) -> ValueError:
    """transformers' refusal of code it found without trust_remote_code as
    [SLA-E047]; any other ValueError as it is."""
    if trust_remote_code or TRUST_REMOTE_CODE not in str(error):
        return error
    return ValueError(Errors.E047.format(reason=first_line(error)))


def _is_local_path(name: str) -> bool:
    """Whether `name` can only mean a local path: a hub id is "model" or
    "namespace/model", never absolute, "./x", "../x", "~/x" or deeper."""
    return (
        os.path.isabs(name)
        or name.startswith((".", "~"))
        or name.count("/") > 1
        or (os.sep != "/" and os.sep in name)
    )


def first_line(error: BaseException) -> str:
    """The first non-empty line of an error's message, without its final stop."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__).rstrip(".")


def is_missing_library(error: BaseException) -> bool:
    """Whether loading a tokenizer failed for a library that is not installed:
    transformers' ImportError for a tokenizer class that needs one, or its
    ValueError when a fast tokenizer cannot be converted from SentencePiece
    files without sentencepiece."""
    if isinstance(error, ImportError):
        return True
    message = str(error)
    converting = "SentencePiece" in message or "sentencepiece" in message or "tiktoken" in message
    return isinstance(error, ValueError) and converting and not is_sentencepiece_available()


def missing_library_reason(error: BaseException) -> str:
    """What is missing, in a sentence (transformers' messages run on)."""
    if isinstance(error, ImportError):
        return first_line(error).split(". ")[0]
    return "transformers cannot make its fast tokenizer from the SentencePiece files without the sentencepiece library"


def _raised_in_spacy_transformers_loader(error: BaseException) -> bool:
    """Whether the error comes from huggingface_from_pretrained's own lines,
    not from the Hugging Face code it calls."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].name == huggingface_from_pretrained.__name__


def _vocabulary_file_name(name: str, tokenizer_config: Dict[str, Any]) -> str:
    """The file name the model's tokenizer class gives its vocabulary (e.g.
    sentencepiece.bpe.model for XLM-R), for the message of [SLA-E005]."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(name), **tokenizer_config)
        file_name: str = tokenizer.vocab_files_names["vocab_file"]
        return file_name
    except (OSError, ValueError, KeyError, ImportError):
        return "the file its tokenizer class names as vocab_file"


@contextmanager
def coded_load_errors(name: str, hub_fix: str = TransformerLoadFixes.HUB) -> Iterator[None]:
    """Turn what prevents finding or reading a Hugging Face model's files
    into [SLA-E005], which names what was looked for and how to fix it."""
    local = Path(str(name)).expanduser()
    if _is_local_path(str(name)) and not local.exists():
        # Hugging Face would try it as a hub id and fail on its form
        # (HFValidationError), without saying that the directory is missing.
        reason = f"the local directory {local.resolve()} does not exist"
        raise OSError(Errors.E005.format(name=name, reason=reason, fix=hub_fix))
    try:
        yield
    except (OSError, HFValidationError) as error:
        reason = first_line(error)
        if not local.exists():
            reason += f"; nor is there a local directory {local.resolve()}"
        raise OSError(Errors.E005.format(name=name, reason=reason, fix=hub_fix)) from error
    except (ImportError, ValueError) as error:
        if not is_missing_library(error):
            raise
        raise OSError(Errors.E005.format(name=name, reason=missing_library_reason(error),
                                         fix=TransformerLoadFixes.LIBRARY)) from error


def check_config_and_tokenizer(name: str, tokenizer_config: Dict[str, Any], hub_fix: str = TransformerLoadFixes.HUB) -> None:
    """Load the model's config and tokenizer (not its weights), as training
    will: [SLA-E005] when they cannot be found or read, in seconds rather
    than when a training starts."""
    with coded_load_errors(name, hub_fix):
        AutoConfig.from_pretrained(name)
        AutoTokenizer.from_pretrained(name, **dict(tokenizer_config))


def load_pretrained(name: str, tokenizer_config: Dict[str, Any], transformer_config: Dict[str, Any],
                    from_saved: bool = False) -> HFObjects:
    """The tokenizer and encoder from a local directory or the hub; whatever
    prevents finding or reading them is [SLA-E005], which names what was
    looked for and how to fix it. Where the settings came with a saved
    pipeline (`from_saved`: a loaded or sourced component initialized),
    trust_remote_code is the loading user's to give ([SLA-E047]), as when
    it loads, and is passed as False otherwise."""
    trust_remote_code = None
    if from_saved:
        requests = configured_code_requests("its config.cfg", tokenizer_config=tokenizer_config,
                                            transformer_config=transformer_config)
        trust_remote_code = trusting_remote_code(requests)
        if trust_remote_code:
            warnings.warn(Warnings.W005)
        tokenizer_config = {**tokenizer_config, TRUST_REMOTE_CODE: trust_remote_code}
        transformer_config = {**transformer_config, TRUST_REMOTE_CODE: trust_remote_code}
    try:
        with coded_load_errors(name):
            return huggingface_from_pretrained(name, dict(tokenizer_config), dict(transformer_config))
    except ValueError as error:
        if trust_remote_code is None:
            raise
        raise _remote_code_error(error, trust_remote_code) from None
    except TypeError as error:
        # spacy-transformers opens tokenizer.vocab_file, None for a fast
        # tokenizer read from tokenizer.json alone
        if not _raised_in_spacy_transformers_loader(error):
            raise
        fix = TransformerLoadFixes.VOCAB_FILE.format(vocab_file=_vocabulary_file_name(name, dict(tokenizer_config)))
        reason = "its tokenizer has no vocabulary file (tokenizer.vocab_file is None)"
        raise OSError(Errors.E005.format(name=name, reason=reason, fix=fix)) from error


# A coded error of spacy-sla ("[SLA-E091] ...") or spaCy ("[E050] ...").
CODED_ERROR = re.compile(r"\[(SLA-)?[EW][0-9]+\]")


@contextmanager
def damage_as_coded_error() -> Iterator[None]:
    """Any error of reading a saved model that is not coded already (a
    TypeError, EOFError, KeyError, RuntimeError, ... of its damaged bytes)
    as [SLA-E124]; a missing library (ImportError) stays what it is."""
    try:
        yield
    except (ImportError, MemoryError):
        raise
    except Exception as error:
        if CODED_ERROR.match(str(error)):
            raise
        raise ValueError(Errors.E124.format(reason=f"{type(error).__name__}: {first_line(error)}")) from error
