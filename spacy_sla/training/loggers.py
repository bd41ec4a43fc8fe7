"""spaCy's console logger, with a column for each auxiliary loss of the
pipeline (the parent-attention loss of LISA-style SLA transformers)."""
from typing import IO, Any, Callable, Dict, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.util import registry

# what spaCy's logger set-up returns: log one step's info, and finish
Printer = Tuple[Callable[[Optional[Dict[str, Any]]], None], Callable[[], None]]


class _LossColumn:
    """Stands in a pipeline entry so that spaCy's logger shows a loss column."""

    is_trainable = True


class _WithAuxiliaryLosses:
    """The nlp object as spaCy's console logger sees it: the pipeline plus
    one entry per auxiliary loss reported by a component's update."""

    def __init__(self, nlp: Language):
        self._nlp = nlp
        extra: List[Tuple[str, Any]] = []
        for _, component in nlp.pipeline:
            settings = getattr(getattr(component, "model", None), "settings", None)  # SLATransformerModel's
            if getattr(settings, "parent_attention", None) is not None:
                # an SLATransformer (pipeline_component, a layer above this one)
                extra.append((getattr(component, "parent_attention_loss_name"), _LossColumn()))
        self.pipeline = list(nlp.pipeline) + extra

    def __getattr__(self, name: str) -> Any:
        return getattr(self._nlp, name)


@registry.loggers("spacy-sla.ConsoleLogger.v1")
def console_logger(
    progress_bar: Optional[str] = None,
    console_output: bool = True,
    output_file: Optional[Union[str, Any]] = None,
) -> Callable[[Language, IO[str], IO[str]], Printer]:
    """spacy.ConsoleLogger.v3 (same arguments: progress_bar is null, "train"
    or "eval") with a "Loss <component>_parent" column for every SLA
    transformer that supervises a parent-attention head."""
    spacy_logger = registry.loggers.get("spacy.ConsoleLogger.v3")(
        progress_bar=progress_bar, console_output=console_output, output_file=output_file
    )

    def setup_printer(nlp: Language, stdout: IO[str], stderr: IO[str]) -> Printer:
        printer: Printer = spacy_logger(_WithAuxiliaryLosses(nlp), stdout, stderr)
        return printer

    return setup_printer
