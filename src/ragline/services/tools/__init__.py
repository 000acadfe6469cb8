"""Chat tools (entry-point group ``ragline.tools``)."""
