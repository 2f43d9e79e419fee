"""A foreign WebSocket peer for SignalingTests: the `websockets` package's server, echoing.

Prints `PORT <n>` once listening on 127.0.0.1 (ephemeral port). Echoes every message, and on a
text message "close:<code>" closes with that code. Exits after the first connection ends, or after
180 seconds in any case (a loaded machine may take long to connect; the test stops it anyway).
"""
import asyncio
import sys

from websockets.asyncio.server import serve


async def main():
    done = asyncio.Event()

    async def handler(ws):
        sys.stderr.write(f"path {ws.request.path}\n")
        try:
            async for message in ws:
                if isinstance(message, str) and message.startswith("close:"):
                    await ws.close(int(message[6:]), "bye from python")
                    break
                if isinstance(message, str) and message == "path?":
                    await ws.send(ws.request.path)
                    continue
                await ws.send(message)
        finally:
            done.set()

    async with serve(handler, "127.0.0.1", 0, max_size=4 * 1024 * 1024) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"PORT {port}", flush=True)
        try:
            await asyncio.wait_for(done.wait(), timeout=180)
        except asyncio.TimeoutError:
            pass
        await asyncio.sleep(0.2)


asyncio.run(main())
