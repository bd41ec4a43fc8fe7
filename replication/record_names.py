"""The names that the committed records' configs (docs/ab/*/configs, configs/)
give the replication's functions from before they left the wheel, registered
for the same functions, so that the records' commands run: `spacy-sla.X` for
each `sla-lab.X` and `sla_token_ner` for `sla_lab_token_ner`. Delete this
module, and its import in functions.py, once no record names them."""
from spacy.language import Language
from spacy.util import registry

from spacy_sla.ab.counts import SCORER_FAMILIES, register_scorer_statistics

from . import heads, scorer_statistics, scorers, token_ner  # noqa: F401  (scorer_statistics: the sla-lab statistics)

for name, function in [
    ("TextCatReduce.v1", heads.build_reduce_text_classifier_random_init),
    ("TextCatCLS.v1", heads.build_cls_text_classifier),
    ("Tagger.v1", heads.build_tagger_random_init),
]:
    registry.architectures.register(f"spacy-sla.{name}", func=function)
for name, function in [
    ("textcat_scorer.v1", scorers.make_textcat_scorer),
    ("entity_scorer.v1", scorers.make_entity_scorer),
    ("error_detection_scorer.v1", scorers.make_error_detection_scorer),
]:
    registry.scorers.register(f"spacy-sla.{name}", func=function)
    register_scorer_statistics(f"spacy-sla.{name}", SCORER_FAMILIES[f"sla-lab.{name}"])
Language.factory(
    "sla_token_ner",
    assigns=["doc.ents", "token.ent_iob", "token.ent_type"],
    default_config=Language.get_factory_meta("sla_lab_token_ner").default_config,
    default_score_weights={"ents_f": 1.0, "ents_p": 0.0, "ents_r": 0.0, "ents_per_type": None},
    func=token_ner.make_token_ner,
)
