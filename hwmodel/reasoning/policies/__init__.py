"""The scheduling policies of system A (MISSION.md section A) as strategy objects, one file each, registered.

A policy (:class:`~hwmodel.reasoning.policies.base.Policy`) says *how* the three models cooperate -- whether the
draft speculates ahead (T2), when the target starts its prefetch, how the draft catches up with the target's
tokens -- and which device of the system the draft runs on by default. It names the capabilities each role needs
and the attachment the draft's device must have, so a system that cannot run it is refused when the platform is
built, with the role, the device and what is missing named. It never asks what kind of device a role runs on.

Built-in policies (one module each): ``baseline``, ``step-ahead`` (T2), ``heteroreason`` (T1+T2),
``heteroreason-reprefill``, ``edge-draft``, ``step-ahead-submit``. A new policy is one Python file that
instantiates a :class:`Policy` and calls :func:`register` (``hwmodel.registry.load_plugin(path)``, or
``HWMODEL_PLUGINS``). Whether a run backtracks is a property of the trace it replays, not of the policy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from hwmodel.reasoning.policies.base import SYNC_MODES, Policy
from hwmodel.registry import Registry

REGISTRY: Registry[Policy] = Registry("reasoning policy", "hwmodel.reasoning.policies")

PolicySpec = Policy  # the name the rest of the code used for a policy


def register(p: Policy, *, replace: bool = False) -> Policy:
    """Register ``p`` under its name (a second policy of the same name is refused unless ``replace``)."""
    return REGISTRY.register(p.name, p, replace=replace)


def policy(name: str) -> Policy:
    """The registered policy ``name`` (one-line error listing the known ones)."""
    return REGISTRY.get(name)


def names() -> list[str]:
    return REGISTRY.names()


class _Policies(Mapping[str, Policy]):
    """Every registered policy by name, built-ins first (a live view: plugins registered later appear)."""

    def __getitem__(self, name: str) -> Policy:
        return policy(name)

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY.names())

    def __len__(self) -> int:
        return len(REGISTRY.names())


POLICIES: Mapping[str, Policy] = _Policies()

__all__ = ["POLICIES", "Policy", "PolicySpec", "REGISTRY", "SYNC_MODES", "names", "policy", "register"]
