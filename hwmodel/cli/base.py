"""The `hwmodel` command group, shared options and error handling.

Command modules live next to this file as ``cmd_*.py`` and are imported by ``hwmodel.cli``; each attaches its
commands to :data:`main` or to a sub-group made with :func:`group`. Command modules import heavy libraries (numba,
jax, dask) inside the command functions, so `hwmodel --help` stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from hwmodel.errors import HwmodelError, UnknownNameError
from hwmodel.specs import KIND_WORDS, extra_spec_dirs, library, set_extra_spec_dirs


class HwGroup(click.Group):
    """A click group that turns HwmodelError into a one-line `Error: ...` message and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HwmodelError as exc:
            raise _HwClickError(str(exc).replace("\n", " ")) from None
        except KeyboardInterrupt:  # Ctrl-C: no traceback, the conventional status (commands may save work first)
            click.echo("interrupted (Ctrl-C)", err=True)
            raise click.exceptions.Exit(130) from None
        except BrokenPipeError:
            raise
        except OSError as exc:  # writing an output (a read-only or full disk, a directory in the way): one line
            where = exc.filename if exc.filename is not None else "output"
            raise _HwClickError(f"{where}: {exc.strerror or exc}") from None


class _HwClickError(click.ClickException):
    exit_code = 2


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


QUIET_KEY, JSON_KEY = "hwmodel.quiet", "hwmodel.json"
"""``ctx.meta`` keys of the global output flags (``--quiet``, ``--json``), shared by the whole context chain."""


def _flag_to_meta(key: str) -> Callable[[click.Context, click.Parameter, bool], None]:
    def store(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.meta[key] = True

    return store


def quiet_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--quiet``: no progress bar and no heartbeat on stderr (results and errors are still printed)."""
    return click.option(
        "--quiet",
        "-q",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_flag_to_meta(QUIET_KEY),
        help="No progress output on stderr (no bar, no heartbeat).",
    )(f)


@click.group(cls=HwGroup, context_settings=CONTEXT_SETTINGS)
@quiet_option
@click.option(
    "--json",
    "global_json",
    is_flag=True,
    expose_value=False,
    callback=_flag_to_meta(JSON_KEY),
    help="Print JSON instead of tables, as the command's own --json (commands without JSON output refuse it).",
)
@click.option(
    "--spec-dir",
    "spec_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of extra spec TOML files (boards, GPUs, links, LLMs); repeatable. "
    "Also read from $HWMODEL_SPEC_PATH.",
)
@click.version_option(package_name="hwmodel")
@click.pass_context
def main(ctx: click.Context, spec_dirs: tuple[Path, ...]) -> None:
    """hwmodel: cycle-level performance and functional model of FPGA-GPU systems for LLM inference."""
    before = extra_spec_dirs()
    set_extra_spec_dirs(spec_dirs)
    # --spec-dir holds for this invocation only: a caller running the CLI in-process (a notebook, CliRunner)
    # gets its own spec directories back, whatever the command's outcome
    ctx.call_on_close(lambda: set_extra_spec_dirs(before))
    import warnings

    from hwmodel.derive import RoundingWarning

    warnings.filterwarnings("always", category=RoundingWarning)  # each is raised once per file/field already
    warnings.showwarning = _one_line_warning


def _one_line_warning(message: Warning | str, category: type[Warning], *_a: object, **_k: object) -> None:
    """A warning on the command line: one line on stderr, no source line of the code that raised it."""
    click.echo(f"warning: {message}", err=True)


_groups: dict[str, click.Group] = {}
GROUP_HELP = {
    "fpga": "FPGA accelerator models: cycle-level decode, co-simulation, HBM profiles, prefetch sweeps.",
    "gpu": "GPU latency and power per phase and serving framework.",
    "link": "Link and transfer-path timing (PCIe, host-staged, peer-to-peer, network).",
    "kvmu": "The KV-cache management unit: command traces, waveforms, RTL verification and synthesis counts.",
    "workload": "Reasoning traces and request streams: generate, validate, import.",
    "study": "Focused studies (frequency scaling, ...).",
}


def group(name: str, help_text: str = "") -> click.Group:
    """The sub-group ``hwmodel NAME`` (created on first use; help from GROUP_HELP when it has an entry)."""
    if name not in _groups:
        grp = click.Group(name=name, help=GROUP_HELP.get(name, help_text), context_settings=CONTEXT_SETTINGS)
        main.add_command(grp)
        _groups[name] = grp
    return _groups[name]


class SpecName(click.ParamType):
    """A spec name on the command line, resolved to the spec; unknown names list the valid choices."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = KIND_WORDS[kind]

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return library().get(self.kind, value)
        except UnknownNameError as exc:
            self.fail(str(exc), param, ctx)
        # any other HwmodelError is a broken spec file somewhere in the library: it propagates with its own
        # file and field (HwGroup prints it), instead of blaming this option


def echo_json(obj: Any) -> None:
    """Print ``obj`` as JSON (numpy scalars converted, non-finite floats as null)."""
    from hwmodel.io import jsonable

    click.echo(json.dumps(jsonable(obj), indent=2))


def json_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def console() -> Any:
    """A rich console for tables (imported lazily)."""
    import sys

    from rich.console import Console

    # Piped output (files, CI logs) gets a wide console so tables are never truncated to 80 columns.
    return Console() if sys.stdout.isatty() else Console(width=220)
