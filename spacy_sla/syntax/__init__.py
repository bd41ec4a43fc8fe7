"""From a Doc's parse to the local branch's token and wordpiece matrices,
with numpy only: the dependency graph (dependency_tree, doc_parses), the
punctuation rule, the MaskBuilder protocol (builders) and the wordpiece
expansion into SyntaxInputs (syntax_inputs)."""
