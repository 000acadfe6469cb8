"""Chat-model providers (kind ``llms``, entry-point group ``ragline.llms``)."""
