"""The per-document statistics of each scored component, counted from its
dev examples as spaCy's scorers count them (spacy.scorer.Scorer and the
scoring functions of its components, spaCy 3.8), and of the scorers that
code given with `--code` registers with register_scorer_statistics:
component_statistics gives every score a statistic (statistics.py) that a
bootstrap draw recomputes."""
from typing import AbstractSet, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

import numpy
from spacy.morphology import Morphology
from spacy.scorer import MISSING_VALUES
from spacy.training import Example

from .statistics import AucStatistic, Counts, CountStatistic, Statistic


def entity_counts(example: Example) -> List[int]:
    """(tp, fp, fn) of exact-match entities in one example, counted as
    spaCy's `get_ner_prf` counts them:
    predicted spans over gold tokens with missing entity annotation are
    neither right nor wrong, an example without gold entity annotation
    counts nothing."""
    if not example.y.has_annotation("ENT_IOB"):
        return [0, 0, 0]
    golds = {(entity.label_, entity.start, entity.end) for entity in example.y.ents}
    tp = fp = 0
    align_x2y = example.alignment.x2y
    for entity in example.x.ents:
        indices = align_x2y[entity.start:entity.end]
        if not len(indices):
            continue
        if all(token.ent_iob != 0 for token in example.y[indices[0]:indices[-1] + 1]):
            key = (entity.label_, int(indices[0]), int(indices[-1]) + 1)
            if key in golds:
                tp += 1
                golds.remove(key)
            else:
                fp += 1
    return [tp, fp, len(golds)]


def _rows(per_example: Iterable[Union[Sequence[int], numpy.ndarray]], width: int) -> Counts:
    rows = numpy.array(list(per_example), dtype=numpy.int64)
    return rows.reshape(-1, width)


def token_attr_counts(
    examples: Sequence[Example],
    attr: str,
    getter: Callable[[Any, str], Any] = getattr,
    missing_values: AbstractSet[Any] = MISSING_VALUES,
) -> Counts:
    """(tp, fp, fn) per example of Scorer.score_token_attr, whose `{attr}_acc`
    is the F1 of their sums."""
    rows = []
    for example in examples:
        gold: Set[Tuple[int, str]] = set()
        missing: Set[int] = set()
        for gold_i, token in enumerate(example.reference):
            value = getter(token, attr)
            if value not in missing_values:
                gold.add((gold_i, value))
            else:
                missing.add(gold_i)
        predicted = {(gold_i, getter(token, attr)) for gold_i, token in _aligned_tokens(example)
                     if gold_i not in missing}
        rows.append(_set_counts(predicted, gold))
    return _rows(rows, 3)


def _aligned_tokens(example: Example) -> Iterator[Tuple[int, Any]]:
    """(gold index, predicted token) of the predicted tokens that align to
    exactly one gold token, whitespace left out: what spaCy's token scorers
    compare."""
    align = example.alignment
    for token in example.predicted:
        if not token.orth_.isspace() and align.x2y.lengths[token.i] == 1:
            yield int(align.x2y[token.i][0]), token


def _set_counts(predicted: set, gold: set) -> Tuple[int, int, int]:
    """PRFScore.score_set's (tp, fp, fn)."""
    return len(predicted & gold), len(predicted - gold), len(gold - predicted)


def _morph_features(doc_vocab: Any, value: Any) -> List[str]:
    morph = doc_vocab.strings[value]
    return [] if morph == Morphology.EMPTY_MORPH else morph.split(Morphology.FEATURE_SEP)


def token_attr_per_feat_counts(
    examples: Sequence[Example],
    attr: str,
    getter: Callable[[Any, str], Any] = getattr,
    missing_values: AbstractSet[Any] = MISSING_VALUES,
) -> Counts:
    """(tp, fp, fn) per example of the micro scores of
    Scorer.score_token_attr_per_feat (features of every field together)."""
    rows = []
    for example in examples:
        vocab = example.reference.vocab
        gold: Set[Tuple[int, str]] = set()
        missing: Set[int] = set()
        for gold_i, token in enumerate(example.reference):
            value = getter(token, attr)
            features = _morph_features(vocab, value) if value not in missing_values else []
            if features:
                gold.update((gold_i, feature) for feature in features)
            else:
                missing.add(gold_i)
        predicted: Set[Tuple[int, str]] = set()
        for gold_i, token in _aligned_tokens(example):
            value = getter(token, attr)
            if gold_i not in missing and value not in missing_values:
                predicted.update((gold_i, feature) for feature in _morph_features(vocab, value))
        rows.append(_set_counts(predicted, gold))
    return _rows(rows, 3)


def span_counts(
    examples: Sequence[Example],
    attr: str,
    getter: Callable[[Any, str], Iterable[Any]] = getattr,
    has_annotation: Optional[Callable[[Any], bool]] = None,
    labeled: bool = True,
    allow_overlap: bool = False,
) -> Counts:
    """(tp, fp, fn) per example of Scorer.score_spans' overall P/R/F."""
    rows = []
    for example in examples:
        if has_annotation is not None and not has_annotation(example.reference):
            rows.append((0, 0, 0))
            continue

        def key(span: Any) -> Tuple:
            return (span.label_, span.start, span.end - 1) if labeled else (span.start, span.end - 1)

        gold = {key(span) for span in getter(example.reference, attr)}
        predicted = set()
        if has_annotation is None or has_annotation(example.predicted):
            predicted = {key(span) for span in example.get_aligned_spans_x2y(getter(example.predicted, attr),
                                                                              allow_overlap)}
        rows.append(_set_counts(predicted, gold))
    return _rows(rows, 3)


def dependency_counts(
    examples: Sequence[Example],
    attr: str = "dep",
    getter: Callable[[Any, str], Any] = getattr,
    head_attr: str = "head",
    head_getter: Callable[[Any, str], Any] = getattr,
    ignore_labels: Iterable[str] = (),
    missing_values: AbstractSet[Any] = MISSING_VALUES,
) -> Tuple[Counts, Counts]:
    """(tp, fp, fn) per example of Scorer.score_deps, unlabelled (UAS) and
    labelled (LAS). spaCy's score_deps keeps the indices of gold tokens
    without a label from one example to the next (its set is made once,
    before the loop), so a later document's token at such a position is
    skipped too; the counts do the same, so that they add up to its scores."""
    unlabelled, labelled = [], []
    missing: Set[int] = set()
    ignored = set(ignore_labels)
    for example in examples:
        align = example.alignment
        gold = set()
        for gold_i, token in enumerate(example.reference):
            dep = getter(token, attr)
            if dep in missing_values:
                missing.add(gold_i)
            elif dep not in ignored:
                gold.add((gold_i, head_getter(token, head_attr).i, dep))
        predicted, unaligned = set(), 0
        for token in example.predicted:
            if token.orth_.isspace():
                continue
            gold_token = align.x2y[token.i][0] if align.x2y.lengths[token.i] == 1 else None
            if gold_token in missing:
                continue
            dep = getter(token, attr)
            head = head_getter(token, head_attr)
            if dep in ignored or not token.orth_.strip():
                continue
            gold_head = align.x2y[head.i][0] if align.x2y.lengths[head.i] == 1 else None
            if gold_token is None or gold_head is None:
                unaligned += 1  # a false positive for both scores
            else:
                predicted.add((gold_token, gold_head, dep))
        tp, fp, fn = _set_counts(predicted, gold)
        labelled.append((tp, fp + unaligned, fn))
        tp, fp, fn = _set_counts({item[:2] for item in predicted}, {item[:2] for item in gold})
        unlabelled.append((tp, fp + unaligned, fn))
    return _rows(unlabelled, 3), _rows(labelled, 3)


def cats_counts(
    examples: Sequence[Example],
    labels: Sequence[str],
    multi_label: bool,
    threshold: Optional[float] = None,
) -> Counts:
    """(tp, fp, fn) per label and example of Scorer.score_cats, label-major
    (columns 3i, 3i+1, 3i+2 for labels[i])."""
    if threshold is None or not multi_label:
        threshold = 0.5 if multi_label else 0.0
    index = {label: i for i, label in enumerate(labels)}
    rows = []
    for example in examples:
        row = numpy.zeros((len(labels), 3), dtype=numpy.int64)
        predicted = {k: v for k, v in example.predicted.cats.items() if k in index}
        gold = {k: v for k, v in example.reference.cats.items() if k in index}
        if multi_label:
            for label in labels:
                pred_score, gold_score = predicted.get(label, 0.0), gold.get(label)
                if gold_score is None:
                    continue
                if pred_score >= threshold and gold_score > 0:
                    row[index[label], 0] += 1
                elif pred_score >= threshold and gold_score == 0:
                    row[index[label], 1] += 1
                elif pred_score < threshold and gold_score > 0:
                    row[index[label], 2] += 1
        elif predicted and gold:
            pred_label = max(predicted.items(), key=lambda item: item[1])[0]
            gold_label = max(gold.items(), key=lambda item: item[1])[0]
            if pred_label == gold_label:
                row[index[pred_label], 0] += 1
            else:
                row[index[gold_label], 2] += 1
                row[index[pred_label], 1] += 1
        elif gold:
            # score_cats' own branch for a document without predicted cats (unreachable for a text
            # classifier, which always predicts)
            gold_label, top_score = max(gold.items(), key=lambda item: item[1])
            if top_score > 0:
                row[index[gold_label], 2] += 1
        elif predicted:
            row[index[max(predicted.items(), key=lambda item: item[1])[0]], 1] += 1
        rows.append(row.ravel())
    return _rows(rows, 3 * len(labels))


def cats_auc_inputs(examples: Sequence[Example], labels: Sequence[str], multi_label: bool) -> AucStatistic:
    """Each document's predicted score and gold value per label, as
    Scorer.score_cats feeds its ROC AUC per label."""
    scores = numpy.zeros((len(examples), len(labels)))
    golds = numpy.full((len(examples), len(labels)), numpy.nan)
    for row, example in enumerate(examples):
        predicted, gold = example.predicted.cats, example.reference.cats
        for column, label in enumerate(labels):
            gold_score = gold.get(label)
            if not gold_score and not multi_label:
                gold_score = 0.0
            scores[row, column] = predicted.get(label, 0.0)
            if gold_score is not None:
                golds[row, column] = gold_score
    return AucStatistic(scores, golds)


# --- the score families, by the scorer a component's config names ----------------------------


def token_attr_statistics(attr: str, getter: Callable = getattr) -> Callable[..., Dict[str, Statistic]]:
    def statistics(examples: Sequence[Example], **kwargs: Any) -> Dict[str, Statistic]:
        missing = kwargs.get("missing_values", MISSING_VALUES)
        return {f"{attr}_acc": CountStatistic("f1", token_attr_counts(examples, attr, getter, missing))}

    return statistics


def _prf_statistics(prefix: str, counts: Counts) -> Dict[str, Statistic]:
    return {f"{prefix}_p": CountStatistic("precision", counts), f"{prefix}_r": CountStatistic("recall", counts),
            f"{prefix}_f": CountStatistic("f1", counts)}


def _morph_key(token: Any, attr: str) -> Any:
    return getattr(token, attr).key


def _morphologizer(examples: Sequence[Example], **kwargs: Any) -> Dict[str, Statistic]:
    missing = kwargs.get("missing_values", MISSING_VALUES)
    statistics = token_attr_statistics("pos")(examples, **kwargs)
    statistics["morph_acc"] = CountStatistic("f1", token_attr_counts(examples, "morph", _morph_key, missing))
    statistics.update(_prf_statistics("morph_micro", token_attr_per_feat_counts(examples, "morph", _morph_key, missing)))
    return statistics


def _has_sents(doc: Any) -> bool:
    return doc.has_annotation("SENT_START")


def _senter(examples: Sequence[Example], **kwargs: Any) -> Dict[str, Statistic]:
    return _prf_statistics("sents", span_counts(examples, "sents", has_annotation=_has_sents))


def _lower_dep(token: Any, attr: str) -> str:
    return token.vocab.strings.as_string(getattr(token, attr)).lower()


def _parser(examples: Sequence[Example], **kwargs: Any) -> Dict[str, Statistic]:
    statistics = _senter(examples)
    unlabelled, labelled = dependency_counts(
        examples, "dep", getter=kwargs.get("getter", _lower_dep),
        ignore_labels=kwargs.get("ignore_labels", ("p", "punct")),
        missing_values=kwargs.get("missing_values", MISSING_VALUES))
    statistics["dep_uas"] = CountStatistic("f1", unlabelled)
    statistics["dep_las"] = CountStatistic("f1", labelled)
    return statistics


def ner_statistics(examples: Sequence[Example], **kwargs: Any) -> Dict[str, Statistic]:
    return _prf_statistics("ents", _rows((entity_counts(example) for example in examples), 3))


def _spancat(examples: Sequence[Example], **kwargs: Any) -> Dict[str, Statistic]:
    key = kwargs["spans_key"]
    prefix = f"spans_{key}"
    counts = span_counts(examples, prefix, getter=lambda doc, _: doc.spans.get(key, []),
                         has_annotation=lambda doc: key in doc.spans,
                         allow_overlap=kwargs.get("allow_overlap", True))
    return _prf_statistics(prefix, counts)


def cats_statistics(multi_label: Optional[bool]) -> Callable[..., Dict[str, Statistic]]:
    def statistics(examples: Sequence[Example], **kwargs: Any) -> Dict[str, Statistic]:
        exclusive = not (kwargs.get("multi_label", False) if multi_label is None else multi_label)
        labels = list(kwargs.get("labels") or [])
        counts = cats_counts(examples, labels, not exclusive, kwargs.get("threshold"))
        auc = cats_auc_inputs(examples, labels, not exclusive)
        result: Dict[str, Statistic] = {
            f"cats_{name}": CountStatistic(formula, counts)
            for name, formula in (("micro_p", "micro_precision"), ("micro_r", "micro_recall"),
                                  ("micro_f", "micro_f1"), ("macro_p", "macro_precision"),
                                  ("macro_r", "macro_recall"), ("macro_f", "macro_f1"))
        }
        result["cats_macro_auc"] = auc
        positive = kwargs.get("positive_label")
        if len(labels) == 2 and exclusive and positive:
            result["cats_score"] = CountStatistic("label_f1", counts, {"label": labels.index(positive)})
        else:
            result["cats_score"] = result["cats_macro_f"] if exclusive else auc
        return result

    return statistics


# registered scorer name -> (its arguments in the config) -> per-document statistics of its scores
ScorerFamily = Callable[..., Callable[..., Dict[str, Statistic]]]
SCORER_FAMILIES: Dict[str, ScorerFamily] = {
    "spacy.tagger_scorer.v1": lambda: token_attr_statistics("tag"),
    "spacy.lemmatizer_scorer.v1": lambda: token_attr_statistics("lemma"),
    "spacy.morphologizer_scorer.v1": lambda: _morphologizer,
    "spacy.senter_scorer.v1": lambda: _senter,
    "spacy.parser_scorer.v1": lambda: _parser,
    "spacy.ner_scorer.v1": lambda: ner_statistics,
    "spacy.spancat_scorer.v1": lambda: _spancat,
    "spacy.textcat_scorer.v2": lambda: cats_statistics(False),
    "spacy.textcat_multilabel_scorer.v2": lambda: cats_statistics(True),
}


def register_scorer_statistics(scorer: str, family: ScorerFamily) -> None:
    """Give the registered scorer `scorer` per-document statistics, so that
    the bootstrap recomputes its scores from counts instead of rerunning it
    on every draw: `family(**arguments)`, called with the scorer block's
    arguments, returns a function of (examples, **scorer_kwargs) that gives
    {score key: CountStatistic or AucStatistic}. Call it in the file given
    with `--code`, beside the scorer's registration; each statistic is
    checked against the scorer's own score before it is used."""
    SCORER_FAMILIES[scorer] = family


def component_statistics(
    scorer_config: Optional[Dict[str, Any]], examples: Sequence[Example], scorer_kwargs: Dict[str, Any]
) -> Dict[str, Statistic]:
    """The per-document statistics of a component's scores: scorer_config is
    the component's `scorer` block ({"@scorers": NAME, ...args}), scorer_kwargs
    what the component passes to its scorer (Pipe.score: its cfg and labels).
    Empty for a scorer this module does not know."""
    if not isinstance(scorer_config, dict) or scorer_config.get("@scorers") not in SCORER_FAMILIES:
        return {}
    arguments = {key: value for key, value in scorer_config.items() if not key.startswith("@")}
    family = SCORER_FAMILIES[scorer_config["@scorers"]](**arguments)
    return family(examples, **scorer_kwargs)


