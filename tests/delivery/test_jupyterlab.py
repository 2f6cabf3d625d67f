"""Local notebooks: `jupyter lab` serves a chapter and runs its first cells in a kernel.

The test starts JupyterLab as the README does (``jupyter lab``, no browser) on a free
localhost port with a random token, opens ``chapters/01_setup.ipynb`` through the
server's contents REST API and the page JupyterLab serves for it, starts a kernel for
the notebook through the sessions API, and executes cells in that kernel over its
websocket (Jupyter messaging protocol 5.3):

- the chapter's first code cell, verbatim (it installs attnbook only where it is
  missing, so here it must find the editable install and do nothing);
- ``import attnbook, torch`` with both versions printed, standing for the chapter's
  second cell, whose imports follow the package's module layout.

Each cell must reply ``ok`` with no error message. Every wait is bounded (server start,
kernel start, each cell), and the server and the kernel are stopped at the end whatever
happened.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

websocket = pytest.importorskip(
    "websocket", reason="websocket-client comes with jupyter_server"
)

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "chapters/01_setup.ipynb"
SERVER_START_S = 30.0  # JupyterLab starts in 3-8 s on a busy 2-core machine
KERNEL_START_S = 30.0  # an ipykernel is ready in 1-3 s
CELL_S = 45.0  # the cells run a package lookup and two imports (torch's takes 2-5 s)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A `jupyter lab` process on localhost with token authentication."""

    def __init__(self, home: Path) -> None:
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "server.log"
        env = dict(os.environ)
        for var, sub in [
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("JUPYTERLAB_SETTINGS_DIR", "lab-settings"),
            ("JUPYTERLAB_WORKSPACES_DIR", "lab-workspaces"),
        ]:
            env[var] = str(
                home / sub
            )  # nothing read from or written to the user's Jupyter dirs
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        jupyter = Path(sys.executable).with_name("jupyter")
        cmd = (
            [str(jupyter), "lab"]
            if jupyter.exists()
            else [sys.executable, "-m", "jupyterlab"]
        )
        cmd += [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={ROOT}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # containers and CI machines often run as root
        with open(self.log_path, "wb") as log:  # the server writes to its own copy
            self.proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log_tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def request(
        self, method: str, path: str, body: dict | None = None, timeout: float = 10.0
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"token {self.token}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"jupyter lab exited ({self.proc.returncode}):\n{self.log_tail()}"
                )
            try:
                if self.request("GET", "/api/status", timeout=2.0)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(
            f"jupyter lab not ready after {timeout:.0f} s:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the server shuts its kernels down
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


class Kernel:
    """A kernel's channels over the server's websocket (JSON messages)."""

    def __init__(self, server: Server, kernel_id: str) -> None:
        url = (
            f"ws://127.0.0.1:{server.port}/api/kernels/{kernel_id}/channels"
            f"?session_id={uuid.uuid4().hex}"
        )
        self.session = uuid.uuid4().hex
        self.ws = websocket.create_connection(
            url, timeout=10, header=[f"Authorization: token {server.token}"]
        )

    def close(self) -> None:
        self.ws.close()

    def request(
        self, msg_type: str, content: dict, timeout: float
    ) -> tuple[dict, list[dict]]:
        """Send one shell request; return its reply and the iopub messages it caused.

        Waits for both the reply and the kernel's return to idle for this request, so
        every output of the request has arrived.
        """
        msg_id = uuid.uuid4().hex
        self.ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": msg_type,
                        "session": self.session,
                        "username": "test",
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "content": content,
                    "channel": "shell",
                    "buffers": [],
                }
            )
        )
        deadline = time.monotonic() + timeout
        reply, iopub, idle = None, [], False
        while reply is None or not idle:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{msg_type}: no {'reply' if reply is None else 'idle'} "
                    f"after {timeout:.0f} s; iopub so far: {iopub}"
                )
            self.ws.settimeout(left)
            msg = json.loads(self.ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["channel"] == "shell":
                reply = msg
            elif msg["channel"] == "iopub":
                iopub.append(msg)
                idle |= (
                    msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"
                )
        return reply, iopub

    def execute(self, code: str, timeout: float) -> str:
        """Run a cell; fail on an error reply or error output; return its stdout."""
        reply, iopub = self.request(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
            timeout,
        )
        errors = [m["content"] for m in iopub if m["msg_type"] == "error"]
        content = reply["content"]
        assert content["status"] == "ok" and not errors, (
            f"cell failed:\n{code}\n{content.get('ename')}: {content.get('evalue')}\n"
            + "\n".join("\n".join(e.get("traceback", [])) for e in errors)
        )
        return "".join(
            m["content"]["text"]
            for m in iopub
            if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )


@pytest.fixture
def server(tmp_path):
    srv = Server(tmp_path)
    try:
        srv.wait_ready(SERVER_START_S)
        yield srv
    finally:
        srv.stop()


def test_chapter_runs_in_jupyterlab_kernel(server):
    status, body = server.request(
        "GET", f"/api/contents/{CHAPTER}?content=1&type=notebook"
    )
    assert status == 200, f"contents API: {status} {body[:500]!r}"
    model = json.loads(body)
    assert model["type"] == "notebook" and model["path"] == CHAPTER
    code_cells = [
        c["source"] for c in model["content"]["cells"] if c["cell_type"] == "code"
    ]
    assert code_cells, f"{CHAPTER} has no code cell"
    assert 'find_spec("attnbook")' in code_cells[0], (
        "the first code cell is the install cell"
    )

    status, body = server.request("GET", f"/lab/tree/{CHAPTER}")
    assert status == 200 and b"JupyterLab" in body, f"/lab/tree/{CHAPTER}: {status}"

    status, body = server.request(
        "POST",
        "/api/sessions",
        {
            "path": CHAPTER,
            "type": "notebook",
            "name": Path(CHAPTER).name,
            "kernel": {"name": model["content"]["metadata"]["kernelspec"]["name"]},
        },
    )
    assert status == 201, f"sessions API: {status} {body[:500]!r}"
    session = json.loads(body)
    kernel_pid = None
    kernel = Kernel(server, session["kernel"]["id"])
    try:
        info, _ = kernel.request("kernel_info_request", {}, KERNEL_START_S)
        assert info["content"]["status"] == "ok"
        assert info["content"]["language_info"]["name"] == "python"

        kernel.execute(code_cells[0], CELL_S)
        out = kernel.execute(
            "import os\nimport attnbook\nimport torch\n"
            "print(os.getpid())\nprint(attnbook.__version__)\n"
            "print(torch.__version__)",
            CELL_S,
        ).split()
        kernel_pid = int(out[0])
        import attnbook

        assert out[1] == attnbook.__version__, (
            f"the kernel imported another attnbook: {out}"
        )
    finally:
        kernel.close()
        server.request(
            "DELETE", f"/api/sessions/{session['id']}"
        )  # shuts the kernel down
        if kernel_pid is not None:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.kill(kernel_pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.2)
            else:
                os.kill(kernel_pid, signal.SIGKILL)
