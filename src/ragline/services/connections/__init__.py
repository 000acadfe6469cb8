"""Named connections (providers with their configs) and ``?service=`` routing."""
