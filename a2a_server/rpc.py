"""The A2A JSON-RPC route: the SDK's, with the parameter checks its parsing leaves out.

The SDK parses params leniently (unknown fields ignored), which also turns an unknown enum
name into the zero value: `ListTasks` with a misspelt `status` would answer every task.
Such a request is answered with invalid params (-32602) instead. A body nested too deeply for
Python's JSON decoder is answered with a parse error (-32700); it was a 500.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.jsonrpc_models import JSONParseError
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import create_jsonrpc_routes
from a2a.types import TaskState
from a2a.utils.errors import InvalidParamsError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

STATES = TaskState.DESCRIPTOR.values_by_name
NUMBERS = TaskState.DESCRIPTOR.values_by_number


def jsonrpc_routes(handler: RequestHandler, rpc_url: str) -> list[Route]:
    """The JSON-RPC endpoint (1.0 methods, and 0.3 ones without the version header)."""
    routes = create_jsonrpc_routes(handler, rpc_url=rpc_url, enable_v0_3_compat=True)
    return [Route(route.path, _checked(route.endpoint), methods=["POST"]) for route in routes]


Endpoint = Callable[[Request], Awaitable[Response]]


def _checked(dispatch: Endpoint) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        try:
            body = await request.json()  # kept by the request for the dispatcher's own read
        except ValueError:
            body = None  # not JSON: the dispatcher answers with a parse error
        except RecursionError:  # the SDK's own read would fail alike, and answer internal error
            too_deep = JSONParseError(message="the JSON is nested too deeply")
            return JSONResponse(build_error_response(None, too_deep))
        problem = params_problem(body)
        if problem is None:
            return await dispatch(request)
        error = InvalidParamsError(message=problem)
        return JSONResponse(build_error_response(_request_id(body), error))

    return endpoint


def params_problem(body: Any) -> str | None:
    """Why a request's params are invalid, for the values the SDK would silently drop."""
    if not isinstance(body, dict) or body.get("method") != "ListTasks":
        return None
    params = body.get("params")
    status = params.get("status") if isinstance(params, dict) else None
    known = (isinstance(status, str) and status in STATES) or (
        type(status) is int and status in NUMBERS
    )
    if status is None or known:
        return None
    names = ", ".join(name for name in STATES if name != "TASK_STATE_UNSPECIFIED")
    return f"unknown task status {status!r}: use one of {names}"


def _request_id(body: dict[str, Any]) -> str | int | None:
    request_id = body.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return request_id
