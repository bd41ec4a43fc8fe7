"""A small report of `spacy sla ab`, as comparison.build_report gives it:
vanilla and sla, three seeds, one section per training size."""
def comparison_row(variant, reference, differences, low, high, p_value, verdict):
    """A row of a paired comparison (resampling.py), the same interval over seeds and documents."""
    mean = sum(differences) / len(differences)
    return {"variant": variant, "reference": reference, "seeds": list(range(len(differences))),
            "over_seeds": {"n": len(differences), "differences": differences, "mean": mean, "low": low, "high": high,
                           "verdict": verdict},
            "over_documents": {"mean": mean, "low": low, "high": high, "p_value": p_value, "verdict": verdict}}


def section(size="all"):
    """A training size's section: the main score of both arms, one other score of vanilla's alone."""
    seeds = {"n": 3, "differences": [0.02, 0.04, 0.03], "mean": 0.03, "low": 0.01, "high": 0.05, "p_value": 0.012,
             "p_holm": 0.024}
    documents = {"mean": 0.03, "low": 0.015, "high": 0.045, "p_value": 0.002, "p_holm": None}
    return {
        "size": size, "train": "train.spacy", "dev_documents": 12, "weights": {"ents_f": 0.5, "tag_acc": 0.5},
        "setup": {"transformer": "tiny-bert", "pipeline": ["transformer", "ner"], "max_steps": 4, "max_epochs": 0,
                  "eval_frequency": 2, "batcher": "spacy.batch_by_words.v1", "accumulate_gradient": 1},
        "rows": [
            {"score": "score", "variant": "vanilla", "mean": 0.8, "std": 0.01, "per_seed": {"0": 0.79, "1": 0.81,
                                                                                            "2": 0.80}},
            {"score": "score", "variant": "sla", "mean": 0.83, "std": 0.02, "per_seed": {"0": 0.81, "1": 0.85,
                                                                                        "2": 0.83},
             "over_seeds": seeds, "over_documents": documents, "verdict": "better", "seeds_needed": 3},
            {"score": "ents_f", "variant": "vanilla", "mean": 0.7, "std": None, "per_seed": {"0": 0.7}},
        ],
        "cost": {"vanilla": {"train_seconds": 10.4, "train_time_ratio": 1.0, "words_per_second": 1500.6,
                             "predict_time_ratio": 1.0},
                 "sla": {"train_seconds": 12.0, "train_time_ratio": 1.153, "words_per_second": None,
                         "predict_time_ratio": None}},
        "curves": {"vanilla": {2: 0.5, 4: 0.8}, "sla": {2: 0.55}},
        "methods": {"ents_f": ["counts"], "cats_macro_auc": ["auc"]},
    }


def report(sizes=("all",)):
    return {"plan": {"config_dir": "configs", "variants": ["vanilla", "sla"], "train": "train.spacy",
                     "dev": "dev.spacy", "seeds": [0, 1, 2], "train_sizes": list(sizes), "sample_seed": 0,
                     "model": "last", "overrides": {}, "resamples": 300},
            "sections": [section(size) for size in sizes]}
