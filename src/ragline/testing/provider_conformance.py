"""What every provider of every kind must show: registration, config, schema, health.

The per-kind suites (:mod:`embedder_conformance`, :mod:`reranker_conformance`,
:mod:`llm_conformance`, :mod:`store_conformance`) inherit these tests. A test
class supplies two fixtures:

* ``provider`` — a working instance;
* ``broken`` — an instance whose service is not usable (unreachable server,
  missing model, a model that fails): its health must say so without raising.
  Without one the failing-health test is skipped.

``KIND`` is the registry group (``"embedders"``...). ``SECRET_OPTIONS`` may name
config fields that must be write-only in the schema (every ``SecretStr`` field
is checked anyway).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import pytest
from pydantic import SecretStr, ValidationError

from ragline.providers.base import Health, ProviderConfig, checked_health
from ragline.providers.registry import registry


def _secret_annotated(annotation: Any) -> bool:
    if annotation is SecretStr:
        return True
    return any(_secret_annotated(a) for a in getattr(annotation, "__args__", ()))


class ProviderContract:
    KIND: ClassVar[str] = ""
    """The registry group of the provider under test, e.g. ``"embedders"``."""

    @pytest.fixture
    def broken(self) -> Any:
        pytest.skip("this test class supplies no failing instance")

    def test_registered_under_its_kind(self, provider: Any) -> None:
        cls = type(provider)
        assert registry.get(self.KIND, cls.name) is cls
        assert isinstance(cls.name, str) and cls.name
        assert cls.kind.rstrip("s") == self.KIND.rstrip("s")

    def test_config_is_typed_and_refuses_unknown_keys(self, provider: Any) -> None:
        config_cls = type(provider).Config
        assert issubclass(config_cls, ProviderConfig)
        with pytest.raises(ValidationError) as err:
            config_cls(surely_not_an_option_xyz=1)
        assert any(e["loc"] == ("surely_not_an_option_xyz",) and e["type"] == "extra_forbidden"
                   for e in err.value.errors())

    def test_connection_schema_is_json_schema_with_write_only_secrets(self,
                                                                      provider: Any) -> None:
        import jsonschema

        cls = type(provider)
        schema = cls.connection_schema()
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema.get("type") == "object"
        props = schema.get("properties", {})
        fields = {info.alias or name: info for name, info in cls.Config.model_fields.items()}
        assert set(props) == set(fields)
        for name, info in fields.items():
            if _secret_annotated(info.annotation):
                assert props[name].get("writeOnly") is True, name

    def test_capabilities_are_declared(self, provider: Any) -> None:
        caps = provider.capabilities()
        assert caps and all(isinstance(c, str) and c for c in caps)
        assert set(getattr(type(provider), "CAPABILITIES", caps)) <= set(caps)

    def test_health_of_a_working_provider(self, provider: Any) -> None:
        health = checked_health(provider)
        assert isinstance(health, Health)
        assert health.status == "ok", health.error
        assert health.error is None
        assert datetime.fromisoformat(health.timestamp).tzinfo is not None
        assert health.details["latency_ms"] >= 0
        self.check_health_details(provider, health.details)

    def check_health_details(self, provider: Any, details: dict[str, Any]) -> None:
        """Kind-specific details (a model name, a dimension, a collection count)."""

    def test_health_of_a_failing_provider(self, broken: Any) -> None:
        health = checked_health(broken)  # never raises
        assert health.status in ("down", "degraded")
        assert isinstance(health.error, str) and health.error
        assert datetime.fromisoformat(health.timestamp).tzinfo is not None
