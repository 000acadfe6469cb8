"""Logs, request ids and Prometheus metrics.

Low in the import graph on purpose: services and providers record metrics with
one-line calls into :mod:`ragline.observability.metrics`, which imports nothing
from ragline; the HTTP wiring (middleware) lives in ``ragline.api.middleware``.
"""
