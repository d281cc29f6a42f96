"""A Jupyter server extension: JupyterLab's status bar says Busy while a cell that opens widgets runs.

The cause (measured with JupyterLab 4.6.6, jupyter-server 2, ipykernel 7.4, ipywidgets 8.1;
docs/PROGRESS.md, "Widgets and JupyterLab's status bar"): since JupyterLab 4.4 the first ``comm_open`` of a
comm target (the first widget of a kernel) makes JupyterLab ask the kernel for a subshell
(``create_subshell_request`` on the control channel; setting ``commsOverSubshells``, default
``perCommTarget``).  The kernel publishes ``busy`` and ``idle`` statuses for that request at once, while
the cell is still running, and JupyterLab's kernel connection takes every status as the kernel's
execution state except those whose parent message type is in the page's ``untracked_message_types``.
That list comes from jupyter-server's ``MappingKernelManager.untracked_message_types``, which is meant to
hold every message type sent on a channel other than the shell channel, but lists no subshell message.
So the status bar reads Idle from the subshell request until the next cell starts.

This extension appends the subshell message types (:data:`SUBSHELL_MESSAGE_TYPES`) to the kernel
manager's list and to the page config JupyterLab reads; JupyterLab's own settings stay as they are.
A wheel install enables it (``etc/jupyter/jupyter_server_config.d/facterlab.json``,
pyproject's data-files); an editable install (``make install``) does not install data files, so copy the
file into the environment that runs JupyterLab::

    cp jupyter-config/jupyter_server_config.d/facterlab.json .venv/etc/jupyter/jupyter_server_config.d/

(``jupyter server extension enable`` refuses a module that no config file names yet.)  To see
JupyterLab's own behaviour where the extension is enabled, start JupyterLab with
``FACTERLAB_JUPYTER_STATUS=0``.  Without the
extension, ``commsOverSubshells: "disabled"`` in JupyterLab's Kernels settings avoids the subshell
requests.
"""

from __future__ import annotations

import os
from typing import Any

MODULE = "facterlab.reporting.jupyter_status"
#: ``FACTERLAB_JUPYTER_STATUS=0`` in the server's environment leaves the list alone (the extension stays
#: enabled but does nothing): JupyterLab then behaves as without facterlab
OFF_SWITCH = "FACTERLAB_JUPYTER_STATUS"
#: control-channel requests and replies of kernel subshells (JEP 91): not the kernel's execution state
SUBSHELL_MESSAGE_TYPES = tuple(
    f"{op}_subshell_{kind}" for op in ("create", "delete", "list") for kind in ("request", "reply")
)


def untracked_with_subshells(untracked: Any) -> list:
    """``untracked`` with the subshell message types appended (each once, order kept).

    >>> untracked_with_subshells(["status", "create_subshell_request"])[:3]
    ['status', 'create_subshell_request', 'create_subshell_reply']
    """
    out = list(untracked or [])
    return out + [t for t in SUBSHELL_MESSAGE_TYPES if t not in out]


def _jupyter_server_extension_points() -> list:
    return [{"module": MODULE}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    if os.environ.get(OFF_SWITCH, "").strip() == "0":  # enabled in the environment, switched off here
        serverapp.log.info("facterlab: %s=0, subshell messages left as JupyterLab reads them", OFF_SWITCH)
        return
    manager = serverapp.kernel_manager
    manager.untracked_message_types = untracked_with_subshells(manager.untracked_message_types)
    # JupyterLab's page config copies the list when JupyterLab's extension starts: update it too, in
    # case that happened before this extension loaded
    page = serverapp.web_app.settings.setdefault("page_config_data", {})
    page["untracked_message_types"] = list(manager.untracked_message_types)
    serverapp.log.info("facterlab: subshell messages are not the kernel's execution state (%s)", MODULE)
