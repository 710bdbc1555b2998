"""The marker before the asked question in every prompt; the loopback server reads it."""
QUESTION_MARKER = "/* Answer the following: "
