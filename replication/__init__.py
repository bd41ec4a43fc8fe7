"""The replication of the paper (Li et al. 2021) with spacy-sla: its tasks,
converters, experiment grid, plain fine-tune baseline and comparisons. Not
part of the wheel; run from the repository root as `python -m replication COMMAND`."""
