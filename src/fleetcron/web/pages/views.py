"""The pages operators live in."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from fleetcron.web.deps import Caller, requires
from fleetcron.web.pages.render import render

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def dashboard(
    request: Request, caller: Annotated[Caller, Depends(requires("job.read"))]
) -> HTMLResponse:
    return render(request, "dashboard.html")
