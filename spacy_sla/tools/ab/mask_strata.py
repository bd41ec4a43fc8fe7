"""Which dev documents a model's local mask restricts, for `spacy sla
bootstrap --by-mask`: is a difference between variants made where the mask
hides something, or also where the local branch equals the global one?

A document is "restricted" when the local mask of some transformer span of
it hides at least one wordpiece pair (padding left out), as the model builds
it in prediction (`local_masks`), from the parse its own pipeline gives the
dev document's tokens (the components before the SLA model run on the
predicted Docs of the dev examples, read as the evaluation reads them:
evaluation.dev_examples). Where nothing is hidden the
local and the global branch see the same keys, so in prediction the layer is
global attention.

The strata of a model are kept in its run directory (dev-mask-strata.json),
keyed like its evaluation by the model and dev files.
"""
import json
from pathlib import Path
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence

import numpy
from spacy import util

from ..inspection.trained_pipeline import InspectionError, select_sla_model
from ..support.files import file_fingerprint, write_atomically
from .errors import Errors
from .evaluation import CONFIG_CORPUS, dev_examples
from .intervals import paired_difference
from .resampling import DrawValues, bootstrap_interval
from .statistics import full_set_value, restrict_statistic, statistic_from_json

STRATA_FILE = "dev-mask-strata.json"
STRATA_VERSION = 1
RESTRICTED, UNRESTRICTED = "restricted", "unrestricted"
GAP = f"{RESTRICTED} - {UNRESTRICTED}"
STRATUM_LABELS = {RESTRICTED: "the mask hides some pairs", UNRESTRICTED: "the mask hides nothing"}


class NoLocalMaskError(ValueError):
    """SLA-E040: the model has no local mask to split the dev set by."""


def restricted_documents(model_dir: Path, dev_path: Path, batch_size: int = 32,
                         corpus: str = CONFIG_CORPUS) -> List[bool]:
    """Per dev example, in the order the evaluation reads them (`corpus`),
    whether the model's local mask hides a wordpiece pair in any of its spans."""
    nlp = util.load_model(model_dir)
    try:
        location = select_sla_model(nlp)
        if location.model.settings.mask is None:
            raise InspectionError("its SLA model has no local mask (mask = null: an SG-Net or LISA variant)")
    except InspectionError as error:
        raise NoLocalMaskError(Errors.E040.format(model=model_dir, reason=error)) from error
    docs = [example.predicted for example in dev_examples(nlp, dev_path, corpus)[0]]
    before = nlp.pipe_names[: nlp.pipe_names.index(location.component)]
    with nlp.select_pipes(enable=before):
        docs = list(nlp.pipe(docs, batch_size=batch_size))
    restricted: List[bool] = []
    for start in range(0, len(docs), batch_size):
        batch = docs[start:start + batch_size]
        masks = iter(location.model.local_masks(batch))  # every span of the batch, Doc after Doc
        for doc_spans in location.model.settings.get_spans(batch):
            restricted.append(any([not next(masks).all() for _ in doc_spans]))  # a list: every mask consumed
    return restricted


def kept_strata(model_dir: Path, dev_path: Path, run_dir: Path, corpus: str = CONFIG_CORPUS) -> List[bool]:
    """restricted_documents, read from the run directory when computed there
    before for the same model and dev files. A model without a local mask is
    recorded as such (NoLocalMaskError again), so that the record answers
    for the model once `spacy sla ab --drop-models` has deleted it; without
    the model, the record is trusted for the dev file alone (it is deleted
    with the run's other records when the run trains again)."""
    path = run_dir / STRATA_FILE
    kept = json.loads(path.read_text(encoding="utf8")) if path.exists() else None
    if not model_dir.exists():
        recorded = {key: kept.get("key", {}).get(key) for key in ("version", "dev")} if kept is not None else None
        # records made before the corpus was part of the key read a plain Corpus
        if kept is None or recorded != {"version": STRATA_VERSION, "dev": file_fingerprint(dev_path)} \
                or kept.get("key", {}).get("corpus", "plain") != corpus:
            raise ValueError(Errors.E044.format(
                run_dir=run_dir, model=model_dir,
                record=f"split of the dev set {dev_path} by mask ({STRATA_FILE}) read with --eval-corpus {corpus}"))
        return _strata_of(kept)
    key = {"version": STRATA_VERSION, "model": file_fingerprint(model_dir / "meta.json"),
           "dev": file_fingerprint(dev_path), "corpus": corpus}
    if kept is not None and kept.get("key") == key:
        return _strata_of(kept)
    try:
        restricted = restricted_documents(model_dir, dev_path, corpus=corpus)
    except NoLocalMaskError as error:
        write_atomically(path, json.dumps({"key": key, "no_local_mask": str(error)}).encode("utf8"))
        raise
    write_atomically(path, json.dumps({"key": key, "restricted": restricted}).encode("utf8"))
    return restricted


def _strata_of(record: Dict[str, Any]) -> List[bool]:
    if "no_local_mask" in record:
        raise NoLocalMaskError(record["no_local_mask"])
    return record["restricted"]


def restrict_evaluation(evaluation: Dict[str, Any], selected: numpy.ndarray) -> Dict[str, Any]:
    """The evaluation of the selected documents alone (a boolean per
    document): per-document statistics keep their rows, scores that were
    recomputed on draws of the whole set are left out, and "scores" holds
    each kept statistic's value on the selection (None where undefined,
    e.g. F-scores with nothing predicted or gold)."""
    if len(selected) != evaluation["documents"]:
        raise ValueError(f"{len(selected)} strata for {evaluation['documents']} documents")
    selected = numpy.asarray(selected, dtype=bool)
    statistics: Dict[str, Any] = {}
    scores: Dict[str, Any] = {}
    for key, entry in evaluation["statistics"].items():
        if entry["method"] == "recomputed":
            continue
        statistic = restrict_statistic(statistic_from_json(entry["statistic"]), selected)
        statistics[key] = {**entry, "statistic": statistic.to_json()}
        scores[key] = full_set_value(statistic) if numpy.any(selected) else None
    return {"documents": int(numpy.sum(selected)), "statistics": statistics, "scores": scores}


def _defined(scores: Dict[int, Optional[float]]) -> Dict[int, float]:
    """The seeds' scores that are not None."""
    return {seed: score for seed, score in scores.items() if score is not None}


def _part_score(part: Dict[str, Any], key: str, weights: Optional[Dict[str, float]]) -> Optional[float]:
    """A part's score: the key's, or with weights spaCy's weighted sum of the
    scores that are not None (a part without documents has none)."""
    if not part["documents"]:
        return None
    if weights is None:
        return part["scores"].get(key)
    return sum(weight * part["scores"][name] for name, weight in weights.items() if part["scores"][name] is not None)


def rows_by_mask(
    variant: str,
    reference: str,
    seeds: Sequence[int],
    evaluations: Dict[Hashable, Dict[str, Any]],
    key: str,
    resamples: int,
    strata_of: Callable[[int], Sequence[bool]],
    random_seed: int = 0,
    weights: Optional[Dict[str, float]] = None,
    min_seeds: int = 2,
) -> List[Dict[str, Any]]:
    """variant − reference (evaluations keyed by (name, seed)) of the score
    `key`, or with weights of their weighted sum, on the documents the
    variant's mask restricts and on those where it hides nothing (each with
    its t-interval over seeds and a bootstrap of its own documents), and the
    first difference minus the second (the two parts drawn independently).
    strata_of(seed): restricted_documents of the variant's model of that
    seed; every seed must give the same parts (a frozen parser), so that the
    seeds are paired on the same documents. min_seeds: the fewest paired
    seeds a t-interval is given for (intervals.paired_difference)."""
    if not seeds:
        return []
    per_seed = {seed: numpy.asarray(strata_of(seed), dtype=bool) for seed in seeds}
    restricted = per_seed[seeds[0]]
    differing = [seed for seed in seeds if not numpy.array_equal(per_seed[seed], restricted)]
    if differing:
        raise ValueError(Errors.E041.format(variant=variant, seeds=", ".join(map(str, [seeds[0], *differing]))))
    needed = list(weights) if weights is not None else [key]
    rows: List[Dict[str, Any]] = []
    draws: Dict[str, Optional[numpy.ndarray]] = {}
    differences: Dict[str, Dict[int, float]] = {}
    for offset, (stratum, selected) in enumerate(((RESTRICTED, restricted), (UNRESTRICTED, ~restricted))):
        parts = {(name, seed): restrict_evaluation(evaluations[(name, seed)], selected)
                 for name in (reference, variant) for seed in seeds}
        lacking = sorted({name for part in parts.values() for name in needed if name not in part["scores"]})
        if lacking:
            raise ValueError(Errors.E042.format(scores=", ".join(lacking)))
        scores = {name: {seed: _part_score(parts[(name, seed)], key, weights) for seed in seeds}
                  for name in (reference, variant)}
        defined = [seed for seed in seeds if scores[variant][seed] is not None and scores[reference][seed] is not None]
        # over the seeds both have: `defined`
        over_seeds = paired_difference(_defined(scores[variant]), _defined(scores[reference]), min_seeds)
        stratum_draws = None
        if defined:
            drawn = DrawValues({model: part for model, part in parts.items() if model[1] in defined}, resamples,
                               random_seed + offset, keys=needed)
            stratum_draws = drawn.difference(variant, reference, defined, key, weights)
        draws[stratum] = stratum_draws
        differences[stratum] = dict(zip(defined, over_seeds["differences"]))
        rows.append({
            "variant": variant, "reference": reference, "stratum": stratum, "documents": int(selected.sum()),
            "seeds": defined, "scores": scores, "over_seeds": over_seeds,
            "over_documents": bootstrap_interval(stratum_draws, over_seeds["mean"], resamples),
        })
    both = sorted(set(differences[RESTRICTED]) & set(differences[UNRESTRICTED]))
    over_seeds = paired_difference(
        {seed: differences[RESTRICTED][seed] - differences[UNRESTRICTED][seed] for seed in both},
        dict.fromkeys(both, 0.0), min_seeds)
    gap = None
    restricted_draws, unrestricted_draws = draws[RESTRICTED], draws[UNRESTRICTED]
    if (set(both) == set(differences[RESTRICTED]) == set(differences[UNRESTRICTED]) and both
            and restricted_draws is not None and unrestricted_draws is not None):
        gap = restricted_draws - unrestricted_draws
    rows.append({
        "variant": variant, "reference": reference, "stratum": GAP, "documents": len(restricted), "seeds": both,
        "scores": {}, "over_seeds": over_seeds,
        "over_documents": bootstrap_interval(gap, over_seeds["mean"], resamples),
    })
    return rows
