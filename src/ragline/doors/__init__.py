"""The doors of :class:`~ragline.facade.Ragline`, one per area (docs/architecture.md).

Each door is a thin class over the services of its area: it asks the one
:class:`~ragline.services.corpus.access.AccessPolicy` whether the caller (a
:class:`~ragline.core.principal.Principal`, always the first argument) may do what
it asks, then calls the services with the tenant scope the policy gives. Doors hold
no state of their own; ``ragline.facade`` assembles them from the services
``ragline.wiring`` builds.
"""
