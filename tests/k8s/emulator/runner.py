"""Run a :class:`KubeEmulator` on a free 127.0.0.1 port in a background thread with its own loop.

``run_emulator()`` is a context manager: on entry the server is listening and a kubeconfig for it
is written (``emu.kubeconfig``; plain HTTP, a dummy bearer token, namespace ``default``), so both
``kubernetes.config.load_kube_config(emu.kubeconfig)`` and ``allot reconcile --kubeconfig`` work.
On exit the open watch streams are ended and the server is shut down.
"""
from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp.test_utils
import aiohttp.web
import kmock
import yaml

from .server import KubeEmulator


def kubeconfig_text(url: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "emulator", "user": {"token": "emulator-token"}}],
        "contexts": [{"name": "emulator",
                      "context": {"cluster": "emulator", "user": "emulator", "namespace": "default"}}],
        "current-context": "emulator",
    }, sort_keys=False)


MAX_REQUEST_BYTES = 3 * 1024 * 1024  # the API server's request body limit


class QuietTestServer(aiohttp.test_utils.RawTestServer):
    """aiohttp's raw test server without access log lines, accepting 3 MiB bodies."""

    async def _make_runner(self, debug: bool = True, **kwargs: Any) -> aiohttp.web.ServerRunner:
        server = aiohttp.web.Server(self._handler, loop=self._loop, debug=debug, access_log=None, **kwargs)
        loop = asyncio.get_running_loop()

        def request_factory(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> Any:
            return aiohttp.web.BaseRequest(message, payload, protocol, writer, task, loop,
                                           client_max_size=MAX_REQUEST_BYTES)

        server.request_factory = request_factory
        return aiohttp.web.ServerRunner(server, debug=debug, shutdown_timeout=2.0, **kwargs)


class EmulatorThread:
    def __init__(self, **options: Any) -> None:
        self.options = options
        self.emulator: KubeEmulator | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="kube-emulator", daemon=True)

    def start(self, timeout: float = 15.0) -> KubeEmulator:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the Kubernetes emulator did not start in time")
        if self._error is not None:
            raise RuntimeError("the Kubernetes emulator failed to start") from self._error
        assert self.emulator is not None
        return self.emulator

    def stop(self, timeout: float = 15.0) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced to the starting thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        emu = KubeEmulator(**self.options)
        emu._loop, emu._loop_thread = self._loop, threading.get_ident()
        async with emu, kmock.Server(emu, host="127.0.0.1", server_cls=QuietTestServer) as server:
            emu._server = server
            self.emulator = emu
            self._ready.set()
            await self._stop.wait()
            emu.drop_watches()
            for _ in range(50):
                if emu.open_watches == 0:
                    break
                await asyncio.sleep(0.02)
        emu._loop = None


@contextlib.contextmanager
def run_emulator(**options: Any) -> Iterator[KubeEmulator]:
    """Serve a fresh emulator for the duration of the ``with`` block (see the package docstring)."""
    runner = EmulatorThread(**options)
    emu = runner.start()
    with tempfile.TemporaryDirectory(prefix="kube-emulator-") as tmp:
        path = Path(tmp) / "kubeconfig"
        path.write_text(kubeconfig_text(emu.url))
        emu.kubeconfig = path
        try:
            yield emu
        finally:
            runner.stop()
