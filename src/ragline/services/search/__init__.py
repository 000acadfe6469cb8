"""The one search pipeline (request, retrieval, fusion, boosts, diversity) and reading around a
hit (context, lesson)."""
