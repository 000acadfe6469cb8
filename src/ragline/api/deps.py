"""FastAPI dependencies: the facade and the calling principal."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ragline.core.principal import Principal
from ragline.facade import Ragline


# async so FastAPI does not send these trivial lookups through its thread pool
async def get_ragline(request: Request) -> Ragline:
    rl: Ragline = request.app.state.ragline
    return rl


async def get_caller(request: Request) -> Principal:
    """Who is calling. Until API keys land every caller is the data directory's owner."""
    rl: Ragline = request.app.state.ragline
    return rl.owner()


RL = Annotated[Ragline, Depends(get_ragline)]
Caller = Annotated[Principal, Depends(get_caller)]
