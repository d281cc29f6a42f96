"""A papermill engine that reports a notebook's parameter error in one line: ``papermill --engine facterlab``.

papermill's command line ends a failed run with an uncaught :class:`papermill.PapermillExecutionError`,
so Python prints papermill's own traceback (about 25 lines of click and papermill frames) before the
cell's error line.  papermill offers no hook into that, but it does let a package register an
execution engine (entry point group ``papermill.engine``; facterlab registers this one as
``facterlab``).  With it::

    papermill notebooks/15_simpson_explorer.ipynb out.ipynb -p N_USERS 0 --engine facterlab

runs the notebook exactly as papermill's default engine (nbclient) does, and when the first failing
cell failed with facterlab's :class:`~facterlab.params.ParameterError` it writes the executed copy
with papermill's error markers and raises :class:`NotebookParameterError`: a
``PapermillExecutionError`` (callers of ``papermill.execute_notebook`` catch it as before) that is
also a ``click.ClickException``, so papermill's command line prints ``Error: <the message>`` and
exits with status 1, without a traceback.  Every other error is left to papermill, traceback and all.

The engine also starts the kernel on the ``ipc`` transport (:func:`kernel_manager_kwargs`), which
spares the ``Kernel is running over TCP without encryption`` warning.

A plain ``papermill`` command (no ``--engine``) cannot be changed by an installed package: the
default engine has no name an entry point could take over, and the traceback is printed by Python
outside any hook papermill offers.  There the message is the last line of the output.

papermill imports every registered engine's module when it is itself imported, so this module
imports papermill only inside its functions (no import cycle, nothing heavy).
"""

from __future__ import annotations

import os
from typing import Any

#: The ``ename`` of :class:`facterlab.params.ParameterError` in a kernel's error output.
PARAMETER_ERROR = "ParameterError"


def kernel_manager_kwargs() -> dict:
    """papermill keywords that start the kernel on the ``ipc`` transport (Unix sockets in Jupyter's
    runtime directory, readable by this user only) instead of TCP on localhost: ipykernel 7 warns
    "Kernel is running over TCP without encryption" for every TCP kernel, once per notebook.  Avoided,
    not silenced: no warning filter is set, so the kernel's other warnings still show.  Windows has
    no ipc transport: TCP there (and the warning)."""
    if os.name == "nt":
        return {}
    from jupyter_client import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            kwargs.setdefault("transport", "ipc")
            kwargs.setdefault("ip", ipc_prefix())
            super().__init__(**kwargs)

    return {"kernel_manager_class": IPCKernelManager}


def ipc_prefix() -> str:
    """A socket path prefix of this kernel's own: ``<runtime dir>/facterlab-<pid>-<random>-ipc``.

    jupyter_client's default prefix is ``kernel-ipc`` in the working folder, and it numbers the sockets
    ``kernel-ipc-1`` ... by the first free numbers it finds there; two processes starting kernels in
    one folder at the same moment (``reproduce --jobs 2``'s lanes) can pick the same numbers, so one
    kernel takes over the other's sockets and its replies fail the other's signature check
    ("Invalid Signature").  A prefix unique to the process and the kernel cannot collide.  The runtime
    directory is this user's only (mode 0700), as for Jupyter's connection files; where its path is too
    long for a socket's, a new temporary folder (also mode 0700) takes its place, removed with its sockets
    when this process exits (its kernels have stopped by then)."""
    import secrets

    from jupyter_core.paths import jupyter_runtime_dir

    name = f"facterlab-{os.getpid()}-{secrets.token_hex(4)}-ipc"
    runtime = jupyter_runtime_dir()
    if len(os.path.join(runtime, name).encode()) > 96:  # a socket path has at most 104 bytes (macOS)
        import atexit
        import shutil
        import tempfile

        runtime = tempfile.mkdtemp(prefix="fl-")  # mode 0700 too; short where the home folder is deep
        atexit.register(shutil.rmtree, runtime, True)  # not left behind in /tmp (ignore_errors=True)
    os.makedirs(runtime, mode=0o700, exist_ok=True)
    return os.path.join(runtime, name)


def first_error(nb: Any) -> tuple | None:
    """``(cell index, cell, error output)`` of the first error output in an executed notebook, as
    papermill's ``raise_for_execution_errors`` finds it (a bare ``SystemExit`` is not an error), or
    None."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            if output.get("ename") == "SystemExit" and output.get("evalue") in ("", "0"):
                continue
            return index, cell, output
    return None


def _error_classes() -> tuple:
    import click
    from papermill.exceptions import PapermillExecutionError

    return PapermillExecutionError, click.ClickException


def one_line_message(evalue: str, exec_count: Any, output_path: Any) -> str:
    """``ParameterError: <message> (cell [N]; executed copy: <path>)``: one line.

    >>> one_line_message("parameter N: expected int, got 'x'", 3, "out.ipynb")
    "ParameterError: parameter N: expected int, got 'x' (cell [3]; executed copy: out.ipynb)"
    """
    where = [f"cell [{exec_count}]"] if exec_count is not None else []
    if output_path:
        where.append(f"executed copy: {output_path}")
    text = " ".join(str(evalue).split())  # one line whatever the message holds
    return f"{PARAMETER_ERROR}: {text}" + (f" ({'; '.join(where)})" if where else "")


_ERROR_CLASS: list = []


def notebook_parameter_error_class() -> type:
    """The class :class:`NotebookParameterError` (built on first use: it derives from papermill's and
    click's exception classes, imported only then)."""
    if not _ERROR_CLASS:
        papermill_error, click_error = _error_classes()

        class NotebookParameterError(papermill_error, click_error):  # type: ignore[misc, valid-type]
            """A notebook's parameter error: papermill's execution error (``cell_index``, ``exec_count``,
            ``source``, ``ename``, ``evalue``, ``traceback``) shown by click as ``Error: <message>``."""

            def __init__(self, error: Any, output_path: Any = None) -> None:
                click_error.__init__(self, one_line_message(error.evalue, error.exec_count, output_path))
                for name in ("cell_index", "exec_count", "source", "ename", "evalue", "traceback"):
                    setattr(self, name, getattr(error, name))

            def __str__(self) -> str:
                return str(self.message)

        NotebookParameterError.__module__ = __name__
        _ERROR_CLASS.append(NotebookParameterError)
    return _ERROR_CLASS[0]


def __getattr__(name: str) -> Any:
    if name == "NotebookParameterError":
        return notebook_parameter_error_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class FacterlabEngine:
    """papermill engine ``facterlab``: papermill's nbclient engine, with the kernel on ``ipc`` and a
    parameter error raised as :class:`NotebookParameterError` (one line on papermill's command line)."""

    @classmethod
    def execute_notebook(cls, nb: Any, kernel_name: Any, output_path: Any = None, **kwargs: Any) -> Any:
        """Run ``nb`` with papermill's nbclient engine, the kernel on ``ipc``; a parameter error becomes a
        :class:`NotebookParameterError` (after the copy with papermill's error markers is written to
        ``output_path``); any other error is left to papermill.

        Returns
        -------
        nbformat.NotebookNode
            The executed notebook.
        """
        from papermill.engines import NBClientEngine

        for key, value in kernel_manager_kwargs().items():
            kwargs.setdefault(key, value)
        nb = NBClientEngine.execute_notebook(nb, kernel_name, output_path=output_path, **kwargs)
        found = first_error(nb)
        if found is None or found[2].get("ename") != PARAMETER_ERROR or not output_path:
            return nb  # papermill reports it as usual (without an output path it would not be written)
        from papermill.exceptions import PapermillExecutionError
        from papermill.execute import raise_for_execution_errors

        try:
            raise_for_execution_errors(nb, output_path)  # writes the copy with papermill's error markers
        except PapermillExecutionError as error:
            raise notebook_parameter_error_class()(error, output_path) from None
        return nb  # pragma: no cover - raise_for_execution_errors raises for an error output

    @classmethod
    def nb_kernel_name(cls, nb: Any, name: Any = None) -> Any:
        """The kernel name papermill's nbclient engine finds for ``nb`` (or ``name``)."""
        from papermill.engines import NBClientEngine

        return NBClientEngine.nb_kernel_name(nb, name)

    @classmethod
    def nb_language(cls, nb: Any, language: Any = None) -> Any:
        """The language papermill's nbclient engine finds for ``nb`` (or ``language``)."""
        from papermill.engines import NBClientEngine

        return NBClientEngine.nb_language(nb, language)
