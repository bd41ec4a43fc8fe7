"""spacy-sla.ConsoleLogger.v1: spaCy's console logger with a loss column for
each supervised parent-attention head."""
import io
from typing import List

from spacy.util import registry

from spacy_sla.training.loggers import console_logger

from util import SLA_ARCHITECTURE, SPANS, sla_nlp

LISA = {"@architectures": SLA_ARCHITECTURE, "get_spans": SPANS, "mask": None,
        "parent_attention": {"@misc": "spacy-sla.parent_attention.v1", "layer": 1, "head": 2, "weight": 1.0}}


def logged_lines(nlp, losses) -> List[str]:
    stdout = io.StringIO()
    log_step, finalize = console_logger(progress_bar=None)(nlp, stdout, io.StringIO())
    log_step({"epoch": 0, "step": 0, "score": 0.0, "other_scores": {}, "checkpoints": [], "seconds": 0,
              "words": 0, "losses": losses})
    finalize()
    return stdout.getvalue().strip().splitlines()


def test_the_console_logger_shows_the_parent_loss(tiny_bert):
    header, _, row = logged_lines(sla_nlp(tiny_bert, **LISA),
                                  {"sla_transformer": 0.0, "sla_transformer_parent": 2.4567})[-3:]
    assert "LOSS SLA_T" in header and header.count("LOSS") == 2
    assert "2.46" in row


def test_without_a_parent_head_it_logs_as_spacys_logger(tiny_bert):
    nlp = sla_nlp(tiny_bert)
    ours = logged_lines(nlp, {"sla_transformer": 1.5})
    stdout = io.StringIO()
    spacy_logger = registry.loggers.get("spacy.ConsoleLogger.v3")(progress_bar=None)
    log_step, finalize = spacy_logger(nlp, stdout, io.StringIO())
    log_step({"epoch": 0, "step": 0, "score": 0.0, "other_scores": {}, "checkpoints": [], "seconds": 0,
              "words": 0, "losses": {"sla_transformer": 1.5}})
    finalize()
    assert ours == stdout.getvalue().strip().splitlines()
    assert ours[-3].count("LOSS") == 1 and "1.50" in ours[-1]

