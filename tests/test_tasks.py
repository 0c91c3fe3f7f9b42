"""tasks.py's test task lets pytest cache its rewritten test modules even where PYTHONDONTWRITEBYTECODE is set."""

from __future__ import annotations

import pytest


def test_the_test_task_lets_pytest_write_its_rewritten_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    import tasks

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("HWMODEL_SOME_SETTING", "kept")
    env = tasks.pytest_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["HWMODEL_SOME_SETTING"] == "kept"
