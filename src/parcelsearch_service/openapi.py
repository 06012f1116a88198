"""The OpenAPI 3.0 document of the reference Search and Markets services.

Served at ``GET /openapi.json`` (no key needed).
"""

from __future__ import annotations

from typing import Any

from parcelsearch.settings import (
    MARKETS_PATH,
    MAX_REQUEST_LINE_BYTES,
    PAGE_SIZE,
    SEARCH_PATH,
    STAGE_PREFIX,
)

__all__ = ["openapi_document"]

_ERROR = {"$ref": "#/components/schemas/Error"}


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": _ERROR}},
    }
    if headers:
        response["headers"] = headers
    return response


_COMMON_ERRORS = {
    "401": _error(
        "Key missing (`Failed to resolve API Key variable request.header.x-api-key`), unknown "
        "(`Invalid ApiKey`) or not enabled for this service (`Invalid ApiKey for given resource`)."
    ),
    "414": _error(f"The request line is longer than {MAX_REQUEST_LINE_BYTES:,} bytes."),
    "429": _error(
        "Spike arrest (`Spike arrest violation. Allowed rate : 10ps`, with Retry-After; not "
        "counted) or quota spent (`Rate limit quota violation. Quota limit exceeded. "
        "Identifier : <key name>`).",
        headers={
            "Retry-After": {
                "description": "Seconds to wait (spike arrest only).",
                "schema": {"type": "integer"},
            }
        },
    ),
}


def _search(tag: str) -> dict[str, Any]:
    return {
        "get": {
            "tags": [tag],
            "operationId": "search" if tag == "search" else "searchProd",
            "summary": "GroupIDs of the parcels inside a polygon, 100 a page",
            "description": (
                "A parcel matches when its representative point lies inside or on the polygon. "
                "`data` lists each matched parcel's GroupID in parcel_id order (condominium "
                "units share one). Every admitted call counts toward the key's quota, 400s "
                "included."
            ),
            "security": [{"ApiKey": []}],
            "parameters": [
                {
                    "name": "searchPolygon",
                    "in": "query",
                    "required": True,
                    "description": (
                        "JSON array of [longitude, latitude] points forming a closed ring of at "
                        "least 4 points: `[[lon,lat],...]`, or `[[[lon,lat],...],...]` whose "
                        "further rings are holes."
                    ),
                    "schema": {"type": "string"},
                    "example": "[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]",
                },
                {
                    "name": "page",
                    "in": "query",
                    "required": False,
                    "description": "1-based page number (default 1).",
                    "schema": {"type": "integer", "minimum": 1, "default": 1},
                },
            ],
            "responses": {
                "200": {
                    "description": "One page of results.",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/SearchPage"}}
                    },
                },
                "400": _error("Malformed searchPolygon or page; the message says how to fix it."),
                **_COMMON_ERRORS,
            },
        }
    }


def _markets(tag: str) -> dict[str, Any]:
    return {
        "get": {
            "tags": [tag],
            "operationId": "markets" if tag == "markets" else "marketsProd",
            "summary": "Names of the active markets, sorted",
            "security": [{"ApiKey": []}],
            "responses": {
                "200": {
                    "description": "The markets list.",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Markets"}}
                    },
                },
                **_COMMON_ERRORS,
            },
        }
    }


def openapi_document(server_url: str = "https://127.0.0.1:8443") -> dict[str, Any]:
    """The OpenAPI 3.0.3 document, with ``server_url`` as the server."""
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "parcelsearch reference Search and Markets services",
            "version": "1",
            "description": (
                "A local reference implementation of the zoning vendor's Search and Markets "
                "REST services. HTTPS only; every call needs the header `x-api-key`. Errors "
                'are always `{"status":"ERROR","messages":[...]}`.'
            ),
        },
        "servers": [{"url": server_url}],
        "paths": {
            SEARCH_PATH: _search("search"),
            MARKETS_PATH: _markets("markets"),
            STAGE_PREFIX + SEARCH_PATH: _search("search (stage prefix)"),
            STAGE_PREFIX + MARKETS_PATH: _markets("markets (stage prefix)"),
        },
        "components": {
            "securitySchemes": {"ApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}},
            "schemas": {
                "SearchPage": {
                    "type": "object",
                    "required": ["status", "rows", "dataRows", "pages", "page", "data"],
                    "additionalProperties": False,
                    "properties": {
                        "status": {"type": "string", "enum": ["OK"]},
                        "rows": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "Matched parcels in all pages.",
                        },
                        "dataRows": {"type": "integer", "minimum": 0, "maximum": PAGE_SIZE},
                        "pages": {"type": "integer", "minimum": 0},
                        "page": {"type": "integer", "minimum": 1},
                        "data": {
                            "type": "array",
                            "maxItems": PAGE_SIZE,
                            "items": {"type": "string", "pattern": "^[0-9a-f]{17}$"},
                        },
                    },
                },
                "Markets": {
                    "type": "object",
                    "required": ["status", "dataRows", "data"],
                    "additionalProperties": False,
                    "properties": {
                        "status": {"type": "string", "enum": ["OK"]},
                        "dataRows": {"type": "integer", "minimum": 0},
                        "data": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "Error": {
                    "type": "object",
                    "required": ["status", "messages"],
                    "additionalProperties": False,
                    "properties": {
                        "status": {"type": "string", "enum": ["ERROR"]},
                        "messages": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    },
                },
            },
        },
    }
