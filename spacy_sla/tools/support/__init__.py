"""What several tools share: writing files atomically and fingerprinting them
(files.py), the user's `--code` (user_code.py), the CoNLL-U reader
(conllu.py) and the Ray session (ray_session.py)."""
