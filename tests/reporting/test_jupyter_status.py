"""facterlab's Jupyter server extension (issue 23, item 4) without a browser: it appends the subshell
message types to the kernel manager's untracked list and to JupyterLab's page config, whatever order
the extensions load in; the shipped config file enables exactly this module, and a wheel installs it.
The browser behaviour is tests/browser/test_browser_explorer.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib

from facterlab.reporting import jupyter_status as js

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "jupyter-config" / "jupyter_server_config.d" / "facterlab.json"


def _server(untracked: list, page: dict | None = None):
    settings = {} if page is None else {"page_config_data": page}
    return SimpleNamespace(
        kernel_manager=SimpleNamespace(untracked_message_types=untracked),
        web_app=SimpleNamespace(settings=settings),
        log=logging.getLogger("test_jupyter_status"),
    )


@pytest.mark.parametrize("lab_first", [False, True])
def test_the_extension_untracks_subshell_messages(lab_first):
    default = ["kernel_info_request", "status", "debug_request"]
    page = {"untracked_message_types": list(default), "other": 1} if lab_first else None
    server = _server(list(default), page)
    js._load_jupyter_server_extension(server)
    want = default + [
        "create_subshell_request",
        "create_subshell_reply",
        "delete_subshell_request",
        "delete_subshell_reply",
        "list_subshell_request",
        "list_subshell_reply",
    ]
    assert server.kernel_manager.untracked_message_types == want
    assert server.web_app.settings["page_config_data"]["untracked_message_types"] == want
    if lab_first:
        assert server.web_app.settings["page_config_data"]["other"] == 1
    js._load_jupyter_server_extension(server)  # twice: nothing added twice
    assert server.kernel_manager.untracked_message_types == want


def test_the_off_switch_leaves_the_list_alone(monkeypatch):
    default = ["kernel_info_request", "status"]
    monkeypatch.setenv(js.OFF_SWITCH, "0")
    server = _server(list(default), {"untracked_message_types": list(default)})
    js._load_jupyter_server_extension(server)
    assert server.kernel_manager.untracked_message_types == default
    assert server.web_app.settings["page_config_data"]["untracked_message_types"] == default
    monkeypatch.setenv(js.OFF_SWITCH, "1")
    js._load_jupyter_server_extension(server)
    assert "create_subshell_request" in server.kernel_manager.untracked_message_types


def test_the_real_kernel_manager_takes_the_list():
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager

    km = MappingKernelManager()
    before = list(km.untracked_message_types)
    assert "create_subshell_request" not in before  # what makes JupyterLab read Idle (docs/PROGRESS.md)
    server = SimpleNamespace(kernel_manager=km, web_app=SimpleNamespace(settings={}), log=logging.getLogger("t"))
    js._load_jupyter_server_extension(server)
    assert list(km.untracked_message_types) == before + list(js.SUBSHELL_MESSAGE_TYPES)
    assert not km.track_message_type("create_subshell_request") and km.track_message_type("execute_request")


def test_shipped_config_enables_this_module_and_a_wheel_installs_it():
    assert json.loads(CONFIG.read_text()) == {"ServerApp": {"jpserver_extensions": {js.MODULE: True}}}
    assert js._jupyter_server_extension_points() == [{"module": js.MODULE}]
    data_files = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    assert data_files == {"etc/jupyter/jupyter_server_config.d": [str(CONFIG.relative_to(REPO))]}
