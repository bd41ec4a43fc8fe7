"""The replication's registered functions: give this file as `--code`.

The task configs (configs/) name functions that only the replication uses,
which are not in the wheel: the task heads `sla-replication.TextCatReduce.v1`,
`sla-replication.TextCatCLS.v1` and `sla-replication.Tagger.v1` (heads.py), the scorers of
the paper's metrics `sla-replication.textcat_scorer.v1`, `sla-replication.entity_scorer.v1`
and `sla-replication.error_detection_scorer.v1` (scorers.py, with their per-document
statistics for the A/B bootstrap: scorer_statistics.py) and the component
`sla_replication_token_ner` (token_ner.py). So every `spacy train`, `spacy evaluate`
and `spacy sla ab` of such a config gets `--code replication/functions.py`
(`python -m replication` passes it to the runs it starts), run from the
repository's root, where `replication` imports from.
"""
from replication import heads, scorer_statistics, scorers, token_ner  # noqa: F401  (register on import)
