"""A PubSub payload passes through `understudy serve` untouched (issue 32 item 2), seen by Python
clients written from docs/protocol.md alone (`websockets` + the standard `json` module).

A publisher sends a payload whose spelling a re-encoding would change: keys out of order, `1.50`,
`1e2`, `-0.0`, an integer beyond 2^53 (`12345678901234567890`, which a double cannot hold), escapes
and whitespace. A live subscriber and a later one (through the history) must receive exactly those
bytes inside the notification text, and Python's own parser, reading numbers as written and keys in
order, must read the same pairs back. In cluster mode (`serve --redis`) the payload stored in Redis
comes back exactly too, after its room's node was killed and another node restored the room.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess

from harness import free_port, kill_process, run_understudy, start_room_server
from room_client import RoomClient, RoomError
from test_cluster import Cluster, owners, token_for
from test_fleet import wait_until

SECRET = "interop-pubsub-secret"
ROOM = "pubsub-payload"
PAYLOAD = '{"z":1.50,"a":1e2,"neg":-0.0,"big":12345678901234567890,"s":"\\u00e9\\/\u00e9","n":[ 1 , {"y":2,"x":1} ]}'


def _token(participant: str) -> str:
    result = run_understudy(
        ["token", "--secret", SECRET, "--room", ROOM, "--participant", participant, "--permissions", "allow_join"],
        timeout=20,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _exact(text: str):
    """The text parsed with numbers kept as written and keys in order."""
    return json.loads(text, object_pairs_hook=list, parse_float=str, parse_int=str)


async def _wait_text(client: RoomClient, needle: str, timeout: float = 20) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        for text in client.texts:
            if needle in text:
                return text
        await asyncio.sleep(0.05)
    raise AssertionError(f"no message with {needle!r}: {client.texts[-3:]}")


async def _scenario(url: str) -> None:
    alice = await RoomClient.connect(url, _token("alice"))
    bob = await RoomClient.connect(url, _token("bob"))
    carol = await RoomClient.connect(url, _token("carol"))
    try:
        await alice.join(ROOM, "alice")
        await bob.join(ROOM, "bob")
        await bob.request("subscribe", {"topic": "t"})
        # Sent as text written by hand: json.dumps would already respell the numbers.
        await alice.ws.send(
            '{"id":"p1","method":"publish","data":{"topic":"t","message":"m","persist":true,"payload":'
            + PAYLOAD + "}}"
        )
        live = await _wait_text(bob, '"pubsubMessage"')
        assert '"payload":' + PAYLOAD in live, live
        message = dict(_exact(live))["data"]
        assert dict(message)["payload"] == _exact(PAYLOAD)

        await carol.join(ROOM, "carol")
        answer = await carol.request("subscribe", {"topic": "t"})
        assert answer["historyCount"] == 1, answer
        history = await _wait_text(carol, '"pubsubHistory"')
        assert '"payload":' + PAYLOAD in history, history

        # Not an object: refused with the documented code.
        try:
            await alice.request("publish", {"topic": "t", "message": "m", "payload": [1]})
            raise AssertionError("a non-object payload was accepted")
        except RoomError as error:
            assert error.code == 4087, error
    finally:
        for client in (alice, bob, carol):
            await client.close()


def test_pubsub_payload_bytes_pass_through() -> None:
    port = free_port()
    server: subprocess.Popen = start_room_server(port, free_port(), SECRET, timeout=20)
    try:
        asyncio.run(asyncio.wait_for(_scenario(f"ws://127.0.0.1:{port}/v1/rtc"), 60))
    finally:
        kill_process(server)


async def _publish_through(port: int) -> RoomClient:
    """Joins room `exact` through the node on `port` and publishes the payload with persist; the
    client stays in the room (a room whose last member leaves drops its state)."""
    client = await RoomClient.connect(f"ws://127.0.0.1:{port}/v1/rtc", token_for("exact", "keeper"))
    await client.join("exact", "keeper", mode="SIGNALLING_ONLY")
    await client.ws.send(
        '{"id":"p1","method":"publish","data":{"topic":"t","message":"m","persist":true,"payload":' + PAYLOAD + "}}"
    )
    await _wait_text(client, '"id":"p1"')
    return client


async def _history_through(port: int) -> str:
    client = await RoomClient.connect(f"ws://127.0.0.1:{port}/v1/rtc", token_for("exact", "late"))
    try:
        await client.join("exact", "late", mode="SIGNALLING_ONLY")
        answer = await client.request("subscribe", {"topic": "t"})
        assert answer["historyCount"] == 1, answer
        return await _wait_text(client, '"pubsubHistory"')
    finally:
        await client.close()


async def _survives_a_node(first, second) -> str:
    keeper = await _publish_through(first.port)
    try:
        owner = await asyncio.to_thread(wait_until, lambda: owners(first).get("exact"), 20, "the room placed")
        doomed, survivor = (first, second) if owner == first.name else (second, first)
        os.killpg(doomed.proc.pid, signal.SIGKILL)
        await asyncio.to_thread(doomed.proc.wait, 10)
        # The survivor takes the room over once the dead node's registration lapses, and restores
        # the message from Redis.
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            try:
                return await asyncio.wait_for(_history_through(survivor.port), 20)
            except Exception:  # noqa: BLE001 - the room is still placed on the dead node
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.5)
    finally:
        await keeper.close()


def test_pubsub_payload_bytes_survive_a_node_through_redis(understudy, tmp_path) -> None:
    with Cluster(tmp_path, "x", 45400, 2) as cluster:
        first, second = cluster.nodes
        history = asyncio.run(_survives_a_node(first, second))
        assert '"payload":' + PAYLOAD in history, history
