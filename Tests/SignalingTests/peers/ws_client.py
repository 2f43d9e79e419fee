"""A foreign WebSocket client for SignalingTests, using the `websockets` package.

Usage: ws_client.py ws://127.0.0.1:PORT/path?query
Against an echo server it checks text, binary, a 150 KiB message, unicode and ping/pong, then
closes with 1000, and prints one line `RESULT ok` (or `RESULT fail <why>`) plus the close code the
server echoed. Exit status 0 only when every check passed.
"""
import asyncio
import os
import sys

from websockets.asyncio.client import connect


async def main(url):
    async with asyncio.timeout(20):
        async with connect(url, max_size=4 * 1024 * 1024) as ws:
            await ws.send("hello from python")
            if await ws.recv() != "hello from python":
                return "text echo mismatch"
            blob = os.urandom(1000)
            await ws.send(blob)
            if await ws.recv() != blob:
                return "binary echo mismatch"
            big = "x" * (150 * 1024)
            await ws.send(big)
            if await ws.recv() != big:
                return "large echo mismatch"
            uni = "héllo wörld ✓ 🎉"
            await ws.send(uni)
            if await ws.recv() != uni:
                return "unicode echo mismatch"
            pong = await ws.ping(b"pp")
            await pong
            await ws.close(1000, "done")
            print(f"CLOSE {ws.close_code}", flush=True)
    return None


failure = asyncio.run(main(sys.argv[1]))
print("RESULT ok" if failure is None else f"RESULT fail {failure}", flush=True)
sys.exit(0 if failure is None else 1)
