"""The service's OpenAPI 3.1 document: Pyserini's ``/v1`` contract plus Hopscotch's additions.

Pyserini's routes, parameters and schema names (``SearchResponse``, ``Candidate``, ``Query``,
``DocumentResponse``, ``DocumentPayload``, ``ErrorResponse``) and security schemes (``X-API-Key`` or a
bearer token, only under ``/v1/``) are kept; this service always sends ``doc`` as a string (or null) and
adds ``max_doc_length`` and ``reason`` to the search, ``GET /v1/indexes``, and ``GET /`` and ``/health``
outside ``/v1``. :func:`openapi_spec` is what ``/openapi.json`` (and ``/docs``) serve, :func:`openapi_yaml`
``/openapi.yaml``.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

import yaml

from hopscotch.retriever.serving.service import DEFAULT_HITS, MAX_HITS


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    why = {400: "Invalid request parameters, or an index this service does not serve.",
           401: "Missing or wrong credentials (only when the service was started with a token).",
           404: "Document not found, or no such route.",
           405: "Method not allowed: only GET (and HEAD) are supported.",
           408: "The request did not arrive in time.",
           413: "Request body too large (requests carry no body).",
           431: "Request line and headers too large.",
           500: "Internal server error.",
           503: "Too many requests in flight; retry after the Retry-After seconds."}
    return {str(s): _json("ErrorResponse", why[s]) for s in statuses}


_INDEX = {"name": "index", "in": "path", "required": True, "schema": {"type": "string"},
          "description": "Index name (as the service was started with; GET /v1/indexes lists them)."}
_PARSE = {"name": "parse", "in": "query", "required": False, "schema": {"type": "boolean", "default": True},
          "description": "true: doc is the document's text ('title\\ntext' with a title); false: the stored "
                         "record {docid, title, text} as a JSON string."}
_MAX_LEN = {"name": "max_doc_length", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0},
            "description": "Cut each doc string to this many characters (default: whole document)."}

_SEARCH_PARAMS = [
    _INDEX,
    {"name": "query", "in": "query", "required": True, "schema": {"type": "string"}, "description": "Query."},
    {"name": "hits", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_HITS, "default": DEFAULT_HITS},
     "description": "Number of hits to return."},
    _PARSE, _MAX_LEN,
    {"name": "reason", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "The agent's reasoning behind this search (cmass's tool argument). Always logged; encoded "
                    "with the query (Reasoning: ...\\n\\nQuery: ...) only when the service runs a "
                    "reasoning-aware model. The response's query.reason_used says which."},
]

_SCHEMAS: dict[str, Any] = {
    "Query": {"type": "object", "required": ["text"], "properties": {
        "text": {"type": "string"},
        "reason_used": {"type": "boolean",
                        "description": "Present when a reason was sent: whether it was encoded with the query."},
        "query_input": {"type": "string", "description": "The query input variant the reason was encoded with."},
    }},
    "Candidate": {"type": "object", "required": ["docid", "score", "rank", "doc"], "properties": {
        "docid": {"type": "string"}, "score": {"type": "number", "format": "float"},
        "rank": {"type": "integer", "minimum": 1}, "doc": _ref("DocumentPayload")}},
    "SearchResponse": {"type": "object", "required": ["api", "index", "query", "candidates"], "properties": {
        "api": {"type": "string", "example": "v1"}, "index": {"type": "string"}, "query": _ref("Query"),
        "candidates": {"type": "array", "items": _ref("Candidate")}}},
    "DocumentResponse": {"type": "object", "required": ["api", "index", "docid", "doc"], "properties": {
        "api": {"type": "string", "example": "v1"}, "index": {"type": "string"}, "docid": {"type": "string"},
        "doc": _ref("DocumentPayload")}},
    "DocumentPayload": {"type": ["string", "null"],
                        "description": "The document as a string (see the parse parameter); null when a hit's "
                                       "document cannot be read."},
    "ErrorResponse": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
    "IndexList": {"type": "object", "required": ["indexes"], "properties": {
        "indexes": {"type": "array", "items": {"type": "string"}},
        "details": {"type": "object", "additionalProperties": {"type": "object"}}}},
    "Health": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
    "Root": {"type": "object", "required": ["name", "version", "openapi", "documentation"], "properties": {
        "name": {"type": "string"}, "version": {"type": "string"}, "description": {"type": "string"},
        "openapi": {"type": "string"}, "documentation": {"type": "string"}}},
}

_ROOT_SERVER = [{"url": "/", "description": "outside /v1: no credentials needed"}]


@lru_cache(maxsize=1)
def _spec() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "Hopscotch search API", "version": "v1",
                 "description": "Pyserini-compatible REST search over a Hopscotch index (BM25, dense or hybrid)."},
        "servers": [{"url": "/v1", "description": "this service"}],
        "security": [{}, {"ApiKeyAuth": []}, {"BearerAuth": []}],
        "paths": {
            "/{index}/search": {"get": {
                "summary": "Search an index", "operationId": "searchV1", "parameters": _SEARCH_PARAMS,
                "responses": {"200": _json("SearchResponse", "Search results."),
                              **_errors(400, 401, 404, 405, 408, 413, 431, 500, 503)}}},
            "/{index}/doc/{docid}": {"get": {
                "summary": "Fetch a document by docid", "operationId": "getDocumentV1",
                "parameters": [_INDEX, {"name": "docid", "in": "path", "required": True, "schema": {"type": "string"},
                                        "description": "Document id (either ClimbMix spelling)."}, _PARSE, _MAX_LEN],
                "responses": {"200": _json("DocumentResponse", "Document found."),
                              **_errors(400, 401, 404, 405, 408, 413, 431, 500, 503)}}},
            "/indexes": {"get": {
                "summary": "List the served indexes", "operationId": "listIndexesV1",
                "responses": {"200": _json("IndexList", "Index names."), **_errors(401, 405)}}},
            "/health": {"servers": _ROOT_SERVER, "get": {
                "summary": "Liveness probe", "operationId": "health", "security": [{}],
                "responses": {"200": _json("Health", "The service is up.")}}},
            "/": {"servers": _ROOT_SERVER, "get": {
                "summary": "What this service is", "operationId": "root", "security": [{}],
                "responses": {"200": _json("Root", "Service description and where its documentation is.")}}},
        },
        "components": {
            "securitySchemes": {
                "ApiKeyAuth": {"type": "apiKey", "in": "header", "name": "X-API-Key",
                               "description": "The service token (the same value as the bearer token)."},
                "BearerAuth": {"type": "http", "scheme": "bearer",
                               "description": "Authorization: Bearer TOKEN (scheme in any case)."}},
            "schemas": _SCHEMAS,
        },
    }


def openapi_spec() -> dict[str, Any]:
    """The OpenAPI document as a dict (a fresh copy)."""
    return copy.deepcopy(_spec())


@lru_cache(maxsize=1)
def openapi_yaml() -> str:
    """The OpenAPI document as YAML text."""
    return yaml.safe_dump(_spec(), sort_keys=False, allow_unicode=True)
