import os
import pickle
import traceback
import warnings
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Dict, Iterator, Mapping, Optional

import srsly
import torch
from huggingface_hub.utils import HFValidationError
from spacy.util import SimpleFrozenDict, make_tempdir
from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.hf_shim import HFShim
from spacy_transformers.layers.transformer_model import huggingface_from_pretrained
from thinc.api import get_torch_default_device
from thinc.types import ArgsKwargs
from transformers import AutoConfig, AutoTokenizer, PretrainedConfig
from transformers.utils import is_sentencepiece_available

from ..errors import Errors, TransformerLoadFixes, Warnings
from .syntax_aware_transformer import SyntaxAwareTransformer

# The only tokenizer setting spacy-transformers saves with a model; a saved
# setting beyond it did not come from saving a pipeline, so it is dropped.
SAVED_TOKENIZER_SETTINGS = ("use_fast",)
TRUST_REMOTE_CODE = "trust_remote_code"


class SyntaxAwareTransformerClass:
    """Stands in for AutoModel where spacy-transformers rebuilds a saved
    model from its config, so that the rebuilt model has the configured
    syntax-aware attention (options of SyntaxAwareTransformer)."""

    def __init__(self, options: Dict[str, Any]):
        self.options = options

    def from_config(self, config: PretrainedConfig) -> SyntaxAwareTransformer:
        return SyntaxAwareTransformer.from_config(config, **self.options)


def check_tokenizer_file_name(name: str) -> str:
    """A name of a saved tokenizer file, refused ([SLA-E046]) unless it is a plain
    file name: the files are written under their names into a temporary
    folder when a pipeline loads, so a name with a folder part (an absolute
    path, `../`, a drive) would write outside it."""
    plain = (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "\x00" not in name
        and PurePosixPath(name).name == name
        and PureWindowsPath(name).name == name
    )
    if not plain:
        raise ValueError(Errors.E046.format(name=repr(name)))
    return name


def loading_tokenizer_settings(saved: Mapping[str, Any], configured: Mapping[str, Any]) -> Dict[str, Any]:
    """The tokenizer settings a saved model is loaded with: of the saved
    ones, only those spacy-transformers saves itself; `trust_remote_code`
    only from the config the pipeline is loaded with, never from the saved
    model, so that a model's own bytes cannot ask to run the code it ships."""
    settings = {key: saved[key] for key in SAVED_TOKENIZER_SETTINGS if key in saved}
    settings[TRUST_REMOTE_CODE] = configured.get(TRUST_REMOTE_CODE) is True
    return settings


class SLAShim(HFShim):
    """The HFShim of spacy-transformers around a SyntaxAwareTransformer.

    Serialization is HFShim's format: the saved state is the
    SyntaxAwareTransformer's state dict (encoder and gates) with the
    encoder's config and tokenizer files. Loading (from_bytes) is our own,
    because the bytes come from a pipeline directory that may not be the
    user's: the weights are read with `weights_only=True` (tensors only, no
    pickled objects, whatever torch's default), tokenizer files are written
    only under plain file names inside a temporary folder, and code shipped
    with the model runs only if the loading config sets
    `tokenizer_config = {"trust_remote_code": true}`. The rebuilt
    SyntaxAwareTransformer's load_state_dict refuses to drop or ignore SLA
    weights, also on the non-strict fallback.

    Prediction leaves the module in eval mode (see predict), so that threads
    sharing one pipeline can predict at the same time.
    """

    def __init__(
        self,
        model: HFObjects,
        options: Dict[str, Any],
        mixed_precision: bool = False,
        grad_scaler_config: Optional[dict] = None,
    ):
        super().__init__(
            model,
            mixed_precision=mixed_precision,
            # HFShim writes into this dict, so never pass a shared default.
            grad_scaler_config=dict(grad_scaler_config or {}),
            model_cls=SyntaxAwareTransformerClass(options),
        )

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
        msg = srsly.msgpack_loads(bytes_data)
        config_dict = msg["config"]
        if not config_dict:
            self._hfmodel = HFObjects(
                None, None, None, msg["_init_tokenizer_config"], msg["_init_transformer_config"]
            )
            return self
        tokenizer_files = dict(msg["tokenizer"])
        saved_settings = tokenizer_files.pop("kwargs", {}) or {}
        for name in tokenizer_files:
            check_tokenizer_file_name(name)
        settings = loading_tokenizer_settings(saved_settings, self._hfmodel._init_tokenizer_config or {})
        trust_remote_code = settings[TRUST_REMOTE_CODE]
        if trust_remote_code:
            warnings.warn(Warnings.W005)
        with make_tempdir() as temp_dir:
            config_file = temp_dir / "config.json"
            srsly.write_json(config_file, config_dict)
            for name, contents in tokenizer_files.items():
                (temp_dir / name).write_bytes(contents)
            try:
                config = self.config_cls.from_pretrained(config_file, trust_remote_code=trust_remote_code)
                tokenizer = self.tokenizer_cls.from_pretrained(str(temp_dir.absolute()), **settings)
            except (ImportError, ValueError) as error:
                if is_missing_library(error):
                    name = config_dict.get("_name_or_path") or "saved with the pipeline"
                    raise OSError(Errors.E005.format(name=name, reason=missing_library_reason(error),
                                                     fix=TransformerLoadFixes.LIBRARY)) from error
                if isinstance(error, ImportError) or trust_remote_code or "trust_remote_code" not in str(error):
                    raise
                raise ValueError(Errors.E047.format(reason=first_line(error))) from None
            vocab_file_contents = _vocab_file_contents(tokenizer, temp_dir)
        transformer = self.model_cls.from_config(config)
        self._hfmodel = HFObjects(tokenizer, transformer, vocab_file_contents, SimpleFrozenDict(), SimpleFrozenDict())
        self._model = transformer
        device = get_torch_default_device()
        try:
            state = torch.load(BytesIO(msg["state"]), map_location=device, weights_only=True)
        except pickle.UnpicklingError as error:
            raise ValueError(Errors.E048.format(reason=str(error).splitlines()[0])) from None
        try:
            self._model.load_state_dict(state)
        except RuntimeError:
            # spacy-transformers' fallback for states saved by other
            # transformers versions (renamed buffers); SLA weights are
            # still checked strictly by SyntaxAwareTransformer.
            warnings.warn(
                "Error loading saved torch state_dict with strict=True, likely due to differences between "
                "'transformers' versions. Attempting to load with strict=False as a fallback..."
            )
            self._model.load_state_dict(state, strict=False)
        self._model.to(device)
        return self


def _vocab_file_contents(tokenizer: Any, folder: Path) -> Optional[bytes]:
    if not hasattr(tokenizer, "vocab_file"):
        return None
    return (folder / tokenizer.vocab_files_names["vocab_file"]).read_bytes()


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


def _vocabulary_file_name(name: str, tokenizer_config: dict) -> str:
    """The file name the model's tokenizer class gives its vocabulary (e.g.
    sentencepiece.bpe.model for XLM-R), for the message of [SLA-E005]."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(name), **tokenizer_config)
        return tokenizer.vocab_files_names["vocab_file"]
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


def check_config_and_tokenizer(name: str, tokenizer_config: dict, hub_fix: str = TransformerLoadFixes.HUB) -> None:
    """Load the model's config and tokenizer (not its weights), as training
    will: [SLA-E005] when they cannot be found or read, in seconds rather
    than when a training starts."""
    with coded_load_errors(name, hub_fix):
        AutoConfig.from_pretrained(name)
        AutoTokenizer.from_pretrained(name, **dict(tokenizer_config))


def load_pretrained(name: str, tokenizer_config: dict, transformer_config: dict) -> HFObjects:
    """The tokenizer and encoder from a local directory or the hub; whatever
    prevents finding or reading them is [SLA-E005], which names what was
    looked for and how to fix it."""
    try:
        with coded_load_errors(name):
            return huggingface_from_pretrained(name, dict(tokenizer_config), dict(transformer_config))
    except TypeError as error:
        # spacy-transformers opens tokenizer.vocab_file, None for a fast
        # tokenizer read from tokenizer.json alone
        if not _raised_in_spacy_transformers_loader(error):
            raise
        fix = TransformerLoadFixes.VOCAB_FILE.format(vocab_file=_vocabulary_file_name(name, dict(tokenizer_config)))
        reason = "its tokenizer has no vocabulary file (tokenizer.vocab_file is None)"
        raise OSError(Errors.E005.format(name=name, reason=reason, fix=fix)) from error
