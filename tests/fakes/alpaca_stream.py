"""A fake Alpaca market-data websocket on 127.0.0.1 for the real ``StockDataStream`` (``url_override``).

It speaks the stream's msgpack protocol (``connected``, ``auth``, ``subscribe``), then sends the
bars a test pushes (``"b"`` minute bars or ``"d"`` daily bars), and can drop every connection to
make the client reconnect::

    with FakeStreamServer(key_id="k", secret_key="s") as stream:
        stream.wait_subscribed()
        stream.push([{"S": "AAA", "t_ns": ..., "o": 1.0, "h": 1.0, "l": 1.0, "c": 1.0, "v": 9.0}])
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import msgpack
from websockets.asyncio.server import Server, ServerConnection, serve


class FakeStreamServer:
    """The fake stream; a context manager. ``kind`` is ``"b"`` (minute bars) or ``"d"`` (daily)."""

    def __init__(self, *, key_id: str, secret_key: str, kind: str = "b") -> None:
        self.key_id, self.secret_key, self.kind = key_id, secret_key, kind
        self.connections = 0
        self._clients: set[ServerConnection] = set()
        self._loop = asyncio.new_event_loop()
        self._server: Server | None = None
        self._ready = threading.Event()
        self._subscribed = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:<port>`` to pass as ``url_override``."""
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}"

    def __enter__(self) -> FakeStreamServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await serve(self._handle, "127.0.0.1", 0)
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    async def _handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        await ws.send(msgpack.packb([{"T": "success", "msg": "connected"}]))
        auth = msgpack.unpackb(await ws.recv())
        if (auth.get("key"), auth.get("secret")) != (self.key_id, self.secret_key):
            await ws.send(msgpack.packb([{"T": "error", "code": 402, "msg": "auth failed"}]))
            return
        await ws.send(msgpack.packb([{"T": "success", "msg": "authenticated"}]))
        sub = msgpack.unpackb(await ws.recv())
        await ws.send(
            msgpack.packb(
                [{"T": "subscription", "bars": sub.get("bars", []), "dailyBars": sub.get("dailyBars", [])}]
            )
        )
        self._clients.add(ws)
        self._subscribed.set()
        try:
            await ws.wait_closed()
        finally:
            self._clients.discard(ws)
            if not self._clients:
                self._subscribed.clear()

    def wait_subscribed(self, timeout: float = 30.0) -> bool:
        """Block until a client has subscribed."""
        return self._subscribed.wait(timeout)

    def push(self, bars: list[dict[str, Any]]) -> None:
        """Send bars (``S``, ``t_ns`` bar start in UTC ns, ``o h l c v``) to every subscribed client."""
        messages = [
            {"T": self.kind, "S": b["S"], "o": b["o"], "h": b["h"], "l": b["l"], "c": b["c"], "v": b["v"],
             "t": msgpack.Timestamp.from_unix_nano(int(b["t_ns"])), "n": 1, "vw": b["c"]}
            for b in bars
        ]  # fmt: skip

        async def send() -> None:
            for ws in list(self._clients):
                await ws.send(msgpack.packb(messages, datetime=False))

        asyncio.run_coroutine_threadsafe(send(), self._loop).result(10)

    def drop(self) -> None:
        """Close every client connection (the client reconnects by itself)."""

        async def close() -> None:
            for ws in list(self._clients):
                await ws.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
