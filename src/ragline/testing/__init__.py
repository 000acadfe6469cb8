"""Test support shipped with ragline: conformance suites and test doubles.

Nothing here is registered as a provider, so it cannot be picked by a
production configuration.
"""
