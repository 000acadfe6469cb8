"""FastAPI dependencies: the facade and the caller's tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ragline.facade import Ragline


# async so FastAPI does not send these trivial lookups through its thread pool
async def get_ragline(request: Request) -> Ragline:
    rl: Ragline = request.app.state.ragline
    return rl


async def get_tenant(request: Request) -> str:
    """The tenant of the caller; the default tenant until authentication lands."""
    rl: Ragline = request.app.state.ragline
    return rl.tenant


RL = Annotated[Ragline, Depends(get_ragline)]
Tenant = Annotated[str, Depends(get_tenant)]
