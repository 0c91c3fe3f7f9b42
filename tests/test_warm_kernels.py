"""The kernel warm-up (tests/warm_kernels.py, docs/testing.md): its two processes between them warm every family,
each once, and one process runs them in the studies' order."""

from __future__ import annotations

import pytest

from tests import warm_kernels


def test_two_parts_warm_every_family_once() -> None:
    names = [name for name, _fn in warm_kernels.FAMILIES]
    parts = [name for part in warm_kernels.TWO_PARTS for name in part]
    assert sorted(parts) == sorted(names)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_the_parts_of_a_warm_up_run_each_family_once(parts: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    fams = tuple((name, lambda name=name: ran.append(name)) for name, _fn in warm_kernels.FAMILIES)
    monkeypatch.setattr(warm_kernels, "FAMILIES", fams)
    for part in range(parts):
        warm_kernels.warm(part, parts)
    assert sorted(ran) == sorted(name for name, _fn in fams)
    if parts == 1:  # one process (`tasks.py run --jobs 1`): the studies' order
        assert ran == [name for name, _fn in fams]
