"""The error hierarchy: a code decides its status, and a class cannot carry a code of
another status (docs/reference.md#error-codes)."""

from __future__ import annotations

import pytest

from aimemory_site.lib.errors import (
    AppError,
    BadRequest,
    Code,
    Conflict,
    NotFound,
    TooManyWaits,
)


def test_a_code_given_at_the_raise_decides_the_status() -> None:
    assert Conflict("full", code=Code.INBOX_FULL).http_status == 409
    assert NotFound("gone", code=Code.PROJECT_NOT_FOUND).http_status == 404
    assert AppError("too long", code=Code.REQUEST_LINE_TOO_LONG).http_status == 414


def test_a_class_without_a_code_answers_its_default() -> None:
    assert BadRequest("no").http_status == 400
    assert TooManyWaits("wait", retry_after_s=1).http_status == 429


def test_a_class_refuses_a_code_of_another_status() -> None:
    with pytest.raises(TypeError, match="BadRequest cannot carry code inbox_full"):
        BadRequest("full", code=Code.INBOX_FULL)


def test_every_code_has_an_error_status() -> None:
    assert all(400 <= code.status <= 599 for code in Code)
    assert str(Code.INVALID_TEXT) == "invalid_text"
