"""Progress of the Python API's long calls (:mod:`hwmodel.api`): a rich bar in a terminal, one updated line in a
notebook."""

from __future__ import annotations


def _in_notebook() -> bool:
    """Running in a Jupyter kernel (where ``progress=None`` means a progress line)."""
    import sys

    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None else None  # type: ignore[attr-defined]
    return type(ip).__name__ == "ZMQInteractiveShell"


class ProgressBar:
    """Progress of a long call: a rich bar in a terminal, one updated output line in a notebook (its last state
    stays in the notebook: ``what: k/total``), nothing when ``enabled`` is False. ``enabled=None``: on in a
    notebook, off elsewhere."""

    def __init__(self, enabled: bool | None, total: int, what: str) -> None:
        self._p = self._line = None
        self._done, self._total, self._what = 0, total, what
        notebook = _in_notebook()
        if enabled is None:
            enabled = notebook
        if enabled and notebook:
            from IPython.display import Pretty, display

            self._line = display(Pretty(f"{what}: 0/{total}"), display_id=True)
        elif enabled:
            from rich.progress import Progress

            self._p = Progress(transient=True)
            self._p.start()
            self._task = self._p.add_task(what, total=total)

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self._p is not None:
            self._p.advance(self._task, n)
        elif self._line is not None:
            from IPython.display import Pretty

            self._line.update(Pretty(f"{self._what}: {self._done}/{self._total}"))

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()
