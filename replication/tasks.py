"""The tasks of the paper's experiments (and the demo's), as the workflows
and configs know them."""
from dataclasses import dataclass
from typing import Dict, Optional


@dataclass(frozen=True)
class Task:
    name: str
    component: str  # the pipe on the transformer: textcat, ner or tagger
    metric: str  # the headline score, as spaCy's scorers name it
    reader: str  # the converter (replication.converters.READERS)
    train_file: str  # relative to the data directory
    dev_file: Optional[str]  # None: the dev set is carved from the training file
    dev_carved: int = 0  # that many training documents, from the start of the file
    description: str = ""


TASKS: Dict[str, Task] = {
    task.name: task
    for task in [
        Task("cola", "textcat", "cats_mcc", "cola", "cola/in_domain_train.tsv", "cola/out_of_domain_dev.tsv",
             description="CoLA acceptability (Matthews correlation)"),
        Task("sst2", "textcat", "cats_accuracy", "sst2", "sst2/train.tsv", None, dev_carved=872,
             description="SST-2 sentiment (accuracy; dev = the first 872 training sentences)"),
        Task("conll2003", "ner", "ents_f", "conll2003", "conll2003/eng.train", "conll2003/eng.testa",
             description="CoNLL-2003 named entities (entity F1, conlleval)"),
        Task("conll2003-docs", "ner", "ents_f", "conll2003-docs", "conll2003/eng.train", "conll2003/eng.testa",
             description="CoNLL-2003 named entities over whole articles, one Doc per -DOCSTART- unit (entity F1)"),
        Task("fce", "tagger", "ged_f05", "fce", "fce/en_fce_train.tsv", "fce/en_fce_dev.tsv",
             description="FCE grammatical error detection (token F0.5 of the error class)"),
        Task("ud", "tagger", "tag_acc", "conllu", "ud_ewt/en_ewt-ud-train.conllu", "ud_ewt/en_ewt-ud-dev.conllu",
             description="UD English EWT fine-grained POS tags (accuracy)"),
    ]
}
