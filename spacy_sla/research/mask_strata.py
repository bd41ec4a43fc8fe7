"""Which dev documents a model's local mask restricts, for `spacy sla
bootstrap --by-mask`: is a difference between variants made where the mask
hides something, or also where the local branch equals the global one?

A document is "restricted" when the local mask of some transformer span of
it hides at least one wordpiece pair (padding left out), as the model builds
it in prediction (`local_masks`), from the parse its own pipeline gives the
dev document's tokens (the components before the SLA model run on the
Corpus reader's Docs, as in `spacy evaluate`). Where nothing is hidden the
local and the global branch see the same keys, so in prediction the layer is
global attention.

The strata of a model are kept in its run directory (dev-mask-strata.json),
keyed like its evaluation by the model and dev files.
"""
import json
from pathlib import Path
from typing import Any, Dict, List

import numpy
from spacy import util
from spacy.training import Corpus

from ..errors import Errors
from ..files import write_atomically
from ..inspection import InspectionError, select_sla_model
from .ab import file_fingerprint
from .score_statistics import full_set_value, restrict_statistic, statistic_from_json

STRATA_FILE = "dev-mask-strata.json"
STRATA_VERSION = 1
RESTRICTED, UNRESTRICTED = "restricted", "unrestricted"
STRATUM_LABELS = {RESTRICTED: "the mask hides some pairs", UNRESTRICTED: "the mask hides nothing"}


def restricted_documents(model_dir: Path, dev_path: Path, batch_size: int = 32) -> List[bool]:
    """Per dev document, in the Corpus reader's order, whether the model's
    local mask hides a wordpiece pair in any of its spans."""
    nlp = util.load_model(model_dir)
    try:
        location = select_sla_model(nlp)
        if location.model.settings.mask is None:
            raise InspectionError("its SLA model has no local mask (mask = null: an SG-Net or LISA variant)")
    except InspectionError as error:
        raise ValueError(Errors.E040.format(model=model_dir, reason=error)) from error
    docs = [example.predicted for example in Corpus(dev_path)(nlp)]
    before = nlp.pipe_names[: nlp.pipe_names.index(location.component)]
    with nlp.select_pipes(enable=before):
        docs = list(nlp.pipe(docs, batch_size=batch_size))
    return [any(not mask.all() for mask in location.model.local_masks([doc])) for doc in docs]


def kept_strata(model_dir: Path, dev_path: Path, run_dir: Path) -> List[bool]:
    """restricted_documents, read from the run directory when computed there
    before for the same model and dev files."""
    key = {"version": STRATA_VERSION, "model": file_fingerprint(model_dir / "meta.json"),
           "dev": file_fingerprint(dev_path)}
    path = run_dir / STRATA_FILE
    if path.exists():
        kept = json.loads(path.read_text(encoding="utf8"))
        if kept.get("key") == key:
            return kept["restricted"]
    restricted = restricted_documents(model_dir, dev_path)
    write_atomically(path, json.dumps({"key": key, "restricted": restricted}).encode("utf8"))
    return restricted


def restrict_evaluation(evaluation: Dict[str, Any], selected: numpy.ndarray) -> Dict[str, Any]:
    """The evaluation of the selected documents alone (a boolean per
    document): per-document statistics keep their rows, scores that were
    recomputed on draws of the whole set are left out, and "scores" holds
    each kept statistic's value on the selection (None where undefined,
    e.g. F-scores with nothing predicted or gold)."""
    if len(selected) != evaluation["documents"]:
        raise ValueError(f"{len(selected)} strata for {evaluation['documents']} documents")
    statistics: Dict[str, Any] = {}
    scores: Dict[str, Any] = {}
    for key, entry in evaluation["statistics"].items():
        if entry["method"] == "recomputed":
            continue
        statistic = restrict_statistic(statistic_from_json(entry["statistic"]), numpy.asarray(selected, dtype=bool))
        statistics[key] = {**entry, "statistic": statistic.to_json()}
        scores[key] = full_set_value(statistic) if numpy.any(selected) else None
    return {"documents": int(numpy.sum(selected)), "statistics": statistics, "scores": scores}
