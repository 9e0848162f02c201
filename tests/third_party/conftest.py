# aws_style/ is a third-party suite with its own pytest root: it imports `nki` / `neuronxcc.nki`, which resolve only
# under `python -m nki_dsl.compat`. The project's suite runs it that way (test_third_party_suite.py), never directly.
collect_ignore = ["aws_style"]
