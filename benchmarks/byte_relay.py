"""A TCP relay that copies bytes both ways between each client connection and the engine, and
nothing else: no HTTP parsing, no logging.  ``bench_serve.py`` sends the engine's own search through
it to measure what one hop through a Python process costs on the machine, the floor under any
proxy written in Python (``esbridge serve`` included).

Usage: ``python benchmarks/byte_relay.py HOST:PORT`` (the engine); prints ``listening on PORT``.
"""

from __future__ import annotations

import asyncio
import socket
import sys


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def main(host: str, port: int) -> None:
    async def connection(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        engine_r, engine_w = await asyncio.open_connection(host, port)
        for w in (client_w, engine_w):
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_copy(client_r, engine_w), _copy(engine_r, client_w))

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    where, _, p = sys.argv[1].rpartition(":")
    asyncio.run(main(where, int(p)))
