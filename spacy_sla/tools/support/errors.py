"""The coded errors of what several tools share: a bad data line, the
user's `--code` (docs/reference.md lists them with their fixes)."""
from spacy_sla.errors import SLACodes


class Errors(metaclass=SLACodes):
    E011 = (
        "{path}:{line_number}: {problem}"
    )
    E087 = (
        "Could not import the Python file {path} given with --code: "
        "{reason}. Pass the file that registers your custom components, "
        "architectures or scorers, the one you give `spacy train --code`; "
        "it is imported from the directory you run the command in, so its "
        "own imports resolve from there."
    )
    E088 = (
        "The config {path} uses what is not registered: {missing}. spaCy "
        "would fail on it in every run (\"Can't find factory\" or \"Could "
        "not find function\"): {hint}; or install the package that "
        "provides them."
    )
