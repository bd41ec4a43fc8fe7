"""The coded errors and warnings of `spacy sla ab` (docs/reference.md lists them with their fixes)."""
from spacy_sla.errors import SLACodes


class Warnings(metaclass=SLACodes):
    W010 = (
        "The report's main score of {arm} disagrees with what its own "
        "training logged for the same model ({model}): {pairs}. {hint}"
    )
    W018 = (
        "The training budget of {where} does not fit its learning-rate "
        "schedule: training.max_steps {max_steps} ends {issue}. Fit the "
        "schedule to the budget with {overrides}, or give more steps."
    )
    W019 = (
        "The main score's dev curve (mean over seeds) still rises at the last "
        "evaluation for {arms}{where}: these models had not converged, and the "
        "comparison is of models that would train further. Give more steps "
        "(--training.max_steps, with the schedule's total_steps to match) and "
        "run the A/B again."
    )


# how data of another format becomes .spacy, for the errors about the data
TO_DOCBIN = (
    "`spacy convert` makes one from CoNLL-U, IOB or spaCy's JSON, but it "
    "does not read JSONL: Prodigy's annotations become one with `prodigy "
    "data-to-spacy`, or, like any JSONL, with the few lines of srsly and "
    "DocBin in docs/your-pipeline.md (\"Your data as .spacy\")."
)


class Errors(metaclass=SLACodes):
    E031 = (
        "The dev set {path} has no documents. Give a .spacy file (or a "
        "directory of them) with the documents to score, e.g. from `spacy "
        "convert`."
    )
    E036 = (
        "The dev set {dev} gives no value of the weighted score {key}: "
        "{finding}. It lacks the annotation the score needs (e.g. entities "
        "for ents_f, cats for cats_score). Give a dev set with that "
        "annotation, or weight other scores in [training.score_weights]."
    )
    E037 = (
        "Cannot draw {size} training documents from {path}: {reason}. "
        "`--train-sizes` takes whole numbers below the corpus size (or "
        "\"all\") and a training corpus in spaCy's binary format (.spacy, or a "
        "directory of them) read by spacy.Corpus.v1. " + TO_DOCBIN
    )
    E039 = (
        "No config for the variant '{variant}' in {config_dir} (no "
        "{path}). Make the configs with `spacy sla init-config YOUR.cfg "
        "{config_dir} --variants ...`, or leave the variant out with "
        "`--variants`."
    )
    E040 = (
        "Cannot split the dev documents by what the local mask hides for the "
        "model {model}: {reason}. `--by-mask` needs variants with a local "
        "mask (sla, window and their kin); leave the others out with "
        "`--variants`."
    )
    E041 = (
        "The seeds {seeds} of {variant} give different dev documents a "
        "restricting mask: their pipelines parse the dev set differently (a "
        "parser trained with the transformer?). `--by-mask` pairs the seeds "
        "on the same documents, so it needs a frozen parser; compare the "
        "seeds apart with `--seeds`."
    )
    E042 = (
        "`--by-mask` cannot score a part of the dev set on {scores}: these "
        "scores were recomputed on draws of the whole dev set, not kept per "
        "document. Leave --by-mask out, or weight scores with per-document "
        "statistics (those of spaCy's tagger, morphologizer, lemmatizer, "
        "ner, spancat, textcat, parser and senter scorers, and spacy-sla's) "
        "in [training.score_weights]."
    )
    E043 = (
        "Cannot use the size setting {size}: {reason}. `--size-override` "
        "takes SIZE:KEY=VALUE[,KEY=VALUE], e.g. "
        "2000:training.max_steps=800, for a size among {sizes}; repeat it "
        "for other sizes."
    )
    E044 = (
        "The run in {run_dir} has no model ({model} is gone: deleted by "
        "--drop-models or by hand) and no {record} recorded before it went. "
        "Train the run again: delete {run_dir} and repeat the command (add "
        "--by-mask from the first call when the report should split the dev "
        "set by mask, so each run records it before its model is deleted)."
    )
    E045 = (
        "No seed in {output_dir} has finished runs of every variant ({arms}) "
        "yet, so there is nothing to pair for a report. Finished runs with "
        "the command's settings: {finished}. Check that the command has the "
        "settings of the runs (`--dry-run` says which runs would be kept), "
        "or wait for a seed's runs to finish."
    )
    E053 = (
        "{output_dir} is in use by another `spacy sla ab` (pid {pid} on "
        "{host}, lock file {lock}): two calls on one output directory would "
        "delete and rewrite each other's runs. Wait for it to finish, give "
        "this call another OUTPUT_DIR, or, if that process is not a `spacy "
        "sla ab` of this directory (e.g. on another host that is gone), "
        "delete {lock}. `--dry-run` runs beside it, and `--report-only` "
        "writes an interim report (report-interim.*) while it trains."
    )
    E056 = (
        "The variant(s) {variants} are not among the configs "
        "`spacy sla init-config` made in {config_dir} ({known}). Choose "
        "`--variants` among those, or make the configs again with "
        "`spacy sla init-config YOUR.cfg {config_dir} --variants ... --overwrite`."
    )
    E057 = (
        "Cannot read the config {path} (the {variant} arm of {config_dir}): "
        "{reason}. Make it again with `spacy sla init-config ... "
        "--overwrite`, or check the override arguments given to `spacy sla ab`."
    )
    E058 = (
        "The config {path} (the {variant} arm) differs from {reference} in "
        "more than the transformer's attention: {keys}. An A/B comparison "
        "must change attention and nothing else, so the arms may differ only "
        "in [components.{transformer}] and the parser that `spacy sla "
        "init-config` adds. Make the configs again with `spacy sla "
        "init-config YOUR.cfg {config_dir} --overwrite`, and change shared "
        "settings in YOUR.cfg or as `--section.key value` arguments of "
        "`spacy sla ab`."
    )
    E062 = (
        "Cannot use {path} as the {which} data: {reason}. Nothing was "
        "trained. Give `--paths.{which} PATH` a .spacy file, or a directory "
        "of them, read by spacy.Corpus.v1. " + TO_DOCBIN
    )
    E063 = (
        "`spacy sla ab` was stopped by {signal}: the run that was training "
        "({run}) was stopped and is not recorded as finished, so the next "
        "call with the same settings trains it again and keeps every "
        "finished run. No report was written."
    )
    E064 = (
        "`spacy sla ab` does not overwrite files it did not write: {files} "
        "in {output_dir}. Move or rename them, or give another OUTPUT_DIR "
        "(ab records the files it writes in {record})."
    )
    E065 = (
        "The {variant} arm's config {path} has attention settings that "
        "cannot be built: {reason} Nothing was trained. Make the configs "
        "again with `spacy sla init-config` and valid options, or fix the "
        "override arguments of `spacy sla ab`."
    )
    E098 = (
        "The run {run} is still being trained by pid {pid} on {host}, "
        "started by an earlier `spacy sla ab` that is gone (record "
        "{record}), so it was not started again: two trainers would write "
        "into one run folder. Wait for that process to end or stop it "
        "(`kill {pid}` on {host}), then run the command again; if that host "
        "is gone, delete {record}."
    )
    E135 = (
        "{record} is damaged: its pid, {pid}, is not a process id (a whole "
        "number above 1), so whether the process that wrote it still runs "
        "cannot be told, and it is not taken as one: nothing was started. "
        "Make sure that no other call is still writing into {place}, then "
        "delete {record} and run the command again."
    )
    E100 = (
        "{run} failed at the {stage} step: {error}{where}. {same_way} Log: "
        "{log}. Fix the cause and run the same command again: finished runs "
        "are kept."
    )
    E101 = (
        "Stopped after {done} of {total} runs; not run (not started, or "
        "stopped on Ray): {not_run}. Why: {reason} Fix the cause and run the "
        "same command again: the finished runs are kept."
    )
    E155 = (
        "`spacy sla ab` needs the data it trains and scores on: give "
        "{missing} (a .spacy file, or a directory of them, each), e.g. "
        "`--paths.train train.spacy --paths.dev dev.spacy`. Nothing was "
        "trained. " + TO_DOCBIN
    )
    E102 = (
        "--eval-corpus takes config (each arm's [training] dev_corpus with "
        "--paths.dev, as `spacy train` scores) or plain (spaCy's Corpus over "
        "--paths.dev, as `spacy evaluate` scores); got '{value}'."
    )
    E145 = (
        "{output_dir} holds {n_runs} finished run(s) trained with other "
        "settings than this call's: {runs}. Training them again would replace "
        "their models and records. Run the same command with --replace to "
        "replace these runs (only these: the others are kept), or give "
        "another OUTPUT_DIR to keep them (or the earlier settings, to resume "
        "them)."
    )


# how to fix [SLA-E005] in an A/B: after TransformerLoadFixes.HUB
OFFLINE_FIX = (
    "With `spacy sla ab`, give every arm a local model directory with "
    "`--components.{component}.model.name PATH`."
)
