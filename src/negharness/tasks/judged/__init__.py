"""Judged tasks: retrieval whose retrieved images a vision-language judge checks (``--judge``)."""
